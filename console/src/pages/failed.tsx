/** Dead letters: action runs that failed for good, with what the service said; retry one or a selection. */
import { useState } from 'preact/hooks';
import { api, enc, withQuery } from '../api.js';
import { Badge, ErrorBox, Loading, PageTitle, useLoad } from '../components/common.js';
import { RequestView } from '../components/timeline.js';
import { runReason } from '../explain.js';
import { when } from '../format.js';
import { Link, to } from '../router.js';
import type { ActionRun, Execution, Page } from '../types.js';

async function load(cursor?: string): Promise<{ runs: ActionRun[]; next: string | null; events: Record<string, string> }> {
  const page = await api<Page<ActionRun>>(withQuery('/admin/actions', { status: 'failed', limit: 100, cursor }));
  const ids = [...new Set(page.items.map((r) => r.execution_id))];
  const executions = await Promise.all(ids.map((id) => api<Execution>(`/admin/executions/${enc(id)}`).catch(() => undefined)));
  const events = Object.fromEntries(executions.filter((x): x is Execution => x !== undefined).map((x) => [x.id, x.event_id]));
  return { runs: page.items, next: page.next_cursor, events };
}

export function Failed() {
  const [cursor, setCursor] = useState<string>();
  const data = useLoad(() => load(cursor), cursor ?? 'first');
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [done, setDone] = useState<string[]>([]);
  const [error, setError] = useState<unknown>();
  const retry = async (ids: string[]) => {
    setError(undefined);
    const ok: string[] = [];
    for (const id of ids) {
      try {
        await api(`/admin/actions/${enc(id)}/retry`, { method: 'POST' });
        ok.push(id);
      } catch (e) {
        setError(e);
      }
    }
    setDone(ok);
    setSelected(new Set());
    await data.reload();
  };
  if (!data.data) return data.error ? <ErrorBox error={data.error} /> : <Loading />;
  const runs = data.data.runs;
  const all = runs.length > 0 && runs.every((r) => selected.has(r.id));
  const flip = (id: string) => setSelected((s) => { const next = new Set(s); if (next.has(id)) next.delete(id); else next.add(id); return next; });
  return (
    <>
      <PageTitle>Failed actions</PageTitle>
      <p>Action runs that failed for good: a 4xx the service will keep refusing, or ACTION_MAX_ATTEMPTS used up. Fix the cause, then retry: the run is sent again with the same Idempotency-Key and the actions after it follow.</p>
      <div class="toolbar">
        <button type="button" class="primary" disabled={selected.size === 0} onClick={() => void retry([...selected])}>Retry selected ({selected.size})</button>
        {done.length > 0 ? <span role="status" class="ok-text">{done.length} action run(s) put back in the queue.</span> : null}
      </div>
      <ErrorBox error={error} />
      {runs.length === 0 ? <p class="muted">No failed action runs. Nothing waits for an operator.</p> : (
        <table class="failed">
          <thead>
            <tr>
              <th scope="col"><input type="checkbox" aria-label="select all" checked={all} onChange={() => setSelected(all ? new Set() : new Set(runs.map((r) => r.id)))} /></th>
              <th scope="col">Failed</th><th scope="col">Rule · action</th><th scope="col">Event</th><th scope="col">What the service said</th><th scope="col">Request</th><th scope="col" />
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.id} data-run={r.id}>
                <td><input type="checkbox" aria-label={`select ${r.type} of ${r.rule}`} checked={selected.has(r.id)} onChange={() => flip(r.id)} /></td>
                <td class="nowrap">{when(r.updated_at)}</td>
                <td><Link href={to.rule(r.rule)}>{r.rule}</Link> · {r.type} <Badge status={r.status} /></td>
                <td class="id">{data.data?.events[r.execution_id] ? <Link href={to.event(data.data.events[r.execution_id])}>{data.data.events[r.execution_id]}</Link> : '—'}</td>
                <td class="reason">{runReason(r)}</td>
                <td><RequestView request={r.request} /></td>
                <td><button type="button" onClick={() => void retry([r.id])}>Retry</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data.data.next ? <button type="button" onClick={() => setCursor(data.data?.next ?? undefined)}>Next page</button> : null}
    </>
  );
}
