/**
 * What matched rules did: each execution as a timeline of its action runs,
 * each run with its rendered request, the attempts this engine remembers
 * (start, duration, status, error), the last answer stored and the next
 * attempt; a failed run can be retried from here.
 */
import { useState } from 'preact/hooks';
import { api, enc } from '../api.js';
import { executionReason, runReason } from '../explain.js';
import { duration, when } from '../format.js';
import { Link, to } from '../router.js';
import type { ActionRun, AttemptRecord, EventContext, Execution, ServiceRequest } from '../types.js';
import { Badge, ErrorBox } from './common.js';
import { Value } from './value.js';

export function RequestView({ request }: { request: ServiceRequest | null | undefined }) {
  if (!request) return <p class="muted">No request rendered yet.</p>;
  const query = request.query ? `?${new URLSearchParams(request.query).toString()}` : '';
  return (
    <div class="request">
      <code class="method">{request.method}</code> <code>/v1{request.path}{query}</code>
      {request.body !== undefined ? (
        <div class="body">
          <Value value={request.body} />
        </div>
      ) : null}
    </div>
  );
}

function Attempts({ run, attempts }: { run: ActionRun; attempts: AttemptRecord[] | null | undefined }) {
  if (!attempts || attempts.length === 0) {
    return run.attempts > 0 ? <p class="muted">{run.attempts} attempt(s); this engine process has no record of their details (restarted, or another replica sent them). The last one is shown below.</p> : null;
  }
  return (
    <ol class="attempts" aria-label="attempts">
      {attempts.map((a, i) => (
        <li key={i} class={`attempt o-${a.outcome}`}>
          <span class="muted">#{i + 1}</span> {when(a.started_at)} · {duration(a.duration_ms)} ·{' '}
          {a.status !== null ? <strong>{a.status}</strong> : <strong>{a.outcome}</strong>}
          {a.error ? (
            <span>
              {' '}
              <code>{a.error.code}</code>: {a.error.message}
            </span>
          ) : null}
          {a.retry_after ? <span class="muted"> (Retry-After {a.retry_after})</span> : null}
        </li>
      ))}
    </ol>
  );
}

function Run({ run, attempts, onChange }: { run: ActionRun; attempts?: AttemptRecord[] | null; onChange: () => void }) {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const retry = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await api(`/admin/actions/${enc(run.id)}/retry`, { method: 'POST' });
      onChange();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <li class={`run st-${run.status}`} data-run={run.id}>
      <div class="run-head">
        <span class="muted">#{run.position + 1}</span> <strong>{run.type}</strong>
        {run.action_id ? <span class="muted"> ({run.action_id})</span> : null} <Badge status={run.status} />{' '}
        <span class="reason">{runReason(run)}</span>
        {run.status === 'failed' ? (
          <button type="button" class="primary" disabled={busy} onClick={retry}>
            {busy ? 'Retrying…' : 'Retry this action'}
          </button>
        ) : null}
      </div>
      <ErrorBox error={error} />
      <RequestView request={run.request} />
      <Attempts run={run} attempts={attempts} />
      <details>
        <summary>
          Last answer{run.response_status ? ` (${run.response_status})` : ''} · updated {when(run.updated_at)} · idempotency key <code>{run.id}</code>
        </summary>
        {run.error ? (
          <p>
            <code>{run.error.code}</code>: {run.error.message}
          </p>
        ) : null}
        <Value value={run.response} />
      </details>
    </li>
  );
}

export function Executions({ executions, context, onChange }: { executions: Execution[]; context?: EventContext; onChange: () => void }) {
  if (executions.length === 0) return <p class="muted">No rule matched this event, so nothing ran.</p>;
  return (
    <ol class="executions">
      {executions.map((x) => (
        <li key={x.id} class="execution" data-execution={x.id}>
          <div class="run-head">
            Rule <Link href={to.rule(x.rule)}>{x.rule}</Link> <span class="muted">v{x.rule_version.slice(0, 8)}</span> <Badge status={x.status} />{' '}
            <span class="reason">{executionReason(x, context)}</span>
          </div>
          <p class="muted">
            started {when(x.created_at)}
            {x.finished_at ? ` · finished ${when(x.finished_at)}` : ''}
          </p>
          <ol class="runs">
            {(x.actions ?? []).map((run) => (
              <Run key={run.id} run={run} attempts={context?.attempts[run.id]} onChange={onChange} />
            ))}
          </ol>
        </li>
      ))}
    </ol>
  );
}
