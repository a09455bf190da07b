/** One rule: definition, state, recent executions, the tester, a backtest; an API rule can be edited or deleted. */
import { useRef, useState } from 'preact/hooks';
import { api, enc, withQuery } from '../api.js';
import { Badge, ErrorBox, Loading, PageTitle, Section, Switch, useLoad } from '../components/common.js';
import { Value } from '../components/value.js';
import { executionReason } from '../explain.js';
import { ago, when } from '../format.js';
import { Link, to } from '../router.js';
import type { Execution, Page, RuleDetail } from '../types.js';
import { NEW_RULE, RuleEditor } from './rule-editor.js';
import { Backtest, RuleTester } from './rule-tester.js';
import { setEnabled } from './rules.js';

function Executions({ id }: { id: string }) {
  const list = useLoad(() => api<Page<Execution>>(withQuery('/admin/executions', { rule: id, limit: 20 })), id);
  if (!list.data) return list.error ? <ErrorBox error={list.error} /> : <Loading />;
  if (list.data.items.length === 0) return <p class="muted">This rule has not matched any event yet.</p>;
  return (
    <table>
      <thead><tr><th scope="col">Started</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Why</th></tr></thead>
      <tbody>
        {list.data.items.map((x) => (
          <tr key={x.id}>
            <td class="nowrap">{when(x.created_at)}</td>
            <td class="id"><Link href={to.event(x.event_id)}>{x.event_id}</Link></td>
            <td><Badge status={x.status} /></td>
            <td class="reason">{x.status === 'failed' || x.status === 'running' ? x.error ?? 'see the event' : executionReason(x)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function RulePage({ id }: { id: string }) {
  const rule = useLoad(() => api<RuleDetail>(`/admin/rules/${enc(id)}`), id);
  const [error, setError] = useState<unknown>();
  const [editing, setEditing] = useState(false);
  const edited = useRef<string | undefined>(undefined);
  if (!rule.data) return rule.error ? <><PageTitle>Rule {id}</PageTitle><ErrorBox error={rule.error} /></> : <Loading />;
  const r = rule.data;
  const toggle = async (on: boolean) => {
    setError(undefined);
    try {
      await setEnabled(r.id, on);
      await rule.reload();
    } catch (e) {
      setError(e);
    }
  };
  const definition = () => {
    try {
      return editing && edited.current ? JSON.parse(edited.current) : r.definition;
    } catch {
      return r.definition;
    }
  };
  return (
    <>
      <PageTitle>Rule <span class="id">{r.id}</span></PageTitle>
      <dl class="summary">
        <div><dt>Name</dt><dd>{r.name ?? '—'}</dd></div>
        <div><dt>Source</dt><dd>{r.source === 'file' ? <>file <code>{r.path}</code></> : 'API (stored in the database)'}</dd></div>
        <div><dt>Enabled</dt><dd><Switch on={r.enabled} label={`rule ${r.id} enabled`} onChange={(on) => void toggle(on)} /></dd></div>
        <div><dt>Triggers</dt><dd>{r.triggers.join(', ')}</dd></div>
        <div><dt>Counts</dt><dd>{r.counts.matched} matched · {r.counts.succeeded} succeeded · {r.counts.failed} failed</dd></div>
        <div><dt>Last matched</dt><dd>{ago(r.last_matched_at)}</dd></div>
        <div><dt>Version</dt><dd><code>{r.version}</code></dd></div>
      </dl>
      <ErrorBox error={error} />
      {r.file_problems?.length ? (
        <section class="card alert"><h2>The file is invalid now</h2><p>{r.note}</p><ul>{r.file_problems.map((p, i) => <li key={i}><code>{p.path}</code>: {p.message}</li>)}</ul></section>
      ) : null}
      <Section title="Definition" id="definition">
        {r.source === 'api' ? (
          editing ? (
            <RuleEditor existing={r} onText={(t) => (edited.current = t)} onSaved={() => { setEditing(false); void rule.reload(); }} />
          ) : (
            <><div class="toolbar"><button type="button" onClick={() => setEditing(true)}>Edit or delete</button></div><Value value={r.definition} /></>
          )
        ) : (
          <><p class="muted">A file rule: change it in its file; the engine reloads it.</p><Value value={r.definition} /></>
        )}
      </Section>
      <Section title="Recent executions" id="recent"><Executions id={r.id} /></Section>
      <Section title="Test it against an event" id="tester"><RuleTester rule={r} /></Section>
      <Section title="Backtest: what would change" id="backtest"><Backtest definition={definition} /></Section>
    </>
  );
}

export function NewRulePage() {
  return (
    <>
      <PageTitle>New API rule</PageTitle>
      <p>An API rule is stored in the database and runs like a file rule. Start from this example (id: <code>{NEW_RULE.id}</code>).</p>
      <RuleEditor />
    </>
  );
}
