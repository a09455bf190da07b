/** Every rule: source, enabled switch, triggers, counters, last matched; and the rule files with problems. */
import { useState } from 'preact/hooks';
import { api, enc } from '../api.js';
import { ErrorBox, Loading, PageTitle, Switch, useLoad } from '../components/common.js';
import { ago } from '../format.js';
import { Link, to } from '../router.js';
import type { FileProblem, Page, RuleDetail, RuleSummary } from '../types.js';

export async function setEnabled(id: string, on: boolean): Promise<RuleDetail> {
  return api<RuleDetail>(`/admin/rules/${enc(id)}/${on ? 'enable' : 'disable'}`, { method: 'POST' });
}

function Problems({ problems }: { problems: FileProblem[] }) {
  if (problems.length === 0) return null;
  return (
    <section class="card alert" aria-labelledby="problems">
      <h2 id="problems">Rule files with problems</h2>
      <p>A file with problems is skipped; if it held a rule before, that rule keeps running at its last good version until the file is fixed.</p>
      <ul>
        {problems.map((p, i) => (
          <li key={i}>
            <code>{p.file}</code>: <code>{p.path}</code>: {p.message}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function Rules() {
  const rules = useLoad(() => api<Page<RuleSummary>>('/admin/rules?limit=500'), 'rules');
  const problems = useLoad(() => api<{ problems: FileProblem[] }>('/admin/rule-problems'), 'problems');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState<string>();
  const toggle = async (rule: RuleSummary, on: boolean) => {
    setBusy(rule.id);
    setError(undefined);
    try {
      await setEnabled(rule.id, on);
      await rules.reload();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(undefined);
    }
  };
  return (
    <>
      <PageTitle>Rules</PageTitle>
      <div class="toolbar">
        <Link href={to.newRule()} class="button primary">New API rule</Link>
        <span class="muted">File rules live in RULES_DIR; API rules are stored in the database and edited here.</span>
      </div>
      <Problems problems={problems.data?.problems ?? []} />
      <ErrorBox error={error ?? rules.error} />
      {rules.data ? (
        <table class="rules">
          <thead>
            <tr><th scope="col">Rule</th><th scope="col">Source</th><th scope="col">Enabled</th><th scope="col">Triggers</th><th scope="col">Matched</th><th scope="col">Succeeded</th><th scope="col">Failed</th><th scope="col">Last matched</th></tr>
          </thead>
          <tbody>
            {rules.data.items.map((r) => (
              <tr key={r.id} data-rule={r.id}>
                <td><Link href={to.rule(r.id)}>{r.id}</Link>{r.name ? <div class="muted">{r.name}</div> : null}</td>
                <td>{r.source === 'file' ? <>file <code>{r.path}</code></> : 'API'}</td>
                <td><Switch on={r.enabled} label={`rule ${r.id} enabled`} disabled={busy === r.id} onChange={(on) => void toggle(r, on)} /></td>
                <td>{r.schedule ? <code>cron {r.schedule.cron}</code> : r.triggers.map((t) => <code key={t}>{t} </code>)}</td>
                <td class="num">{r.counts.matched}</td>
                <td class="num">{r.counts.succeeded}</td>
                <td class="num">{r.counts.failed}</td>
                <td>{ago(r.last_matched_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : rules.error ? null : <Loading />}
    </>
  );
}
