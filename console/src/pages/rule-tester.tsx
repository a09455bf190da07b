/**
 * Trying a rule: against a stored event (picked from the latest) or one pasted
 * in, as POST /admin/rules/:id/test does it (nothing sent, nothing stored): the
 * condition tree with results and the exact requests the actions would send.
 * And a backtest over a time range: what would change against stored events.
 */
import { useState } from 'preact/hooks';
import { api, enc, withQuery } from '../api.js';
import { Badge, ErrorBox, useLoad } from '../components/common.js';
import { ConditionTree } from '../components/conditions.js';
import { RequestView } from '../components/timeline.js';
import { whyNotMatched } from '../explain.js';
import { fromLocalInput, toLocalInput, when } from '../format.js';
import { Link, to } from '../router.js';
import type { BacktestReport, EventDetail, EventSummary, Page, RuleDetail, TestResult } from '../types.js';

function TestOutcome({ result }: { result: TestResult }) {
  const verdict = result.ignored ? 'ignored (self-caused)' : result.matched ? 'matched' : result.listens ? 'not matched' : 'does not listen';
  return (
    <div class="test-result" data-matched={String(result.matched)}>
      <p>
        <Badge status={result.matched ? 'matched' : 'not_matched'} /> <strong>{verdict}</strong>
        {!result.listens ? <span> — the rule does not listen to this event's type</span> : null}
        {!result.matched && result.listens && !result.error ? <span class="reason"> — {whyNotMatched(result.conditions)}</span> : null}
        {result.error ? <span class="error-text"> — {result.error}</span> : null}
      </p>
      <ConditionTree conditions={result.conditions} matched={result.matched} />
      {result.actions.length > 0 ? (
        <>
          <h3>Requests the actions would send</h3>
          <ol class="requests">
            {result.actions.map((a, i) => (
              <li key={i}>
                <strong>{a.type}</strong>{a.id ? <span class="muted"> ({a.id})</span> : null}
                {a.error ? <p class="error-text"><code>{a.error.code}</code>: {a.error.message}</p> : <RequestView request={a.request} />}
              </li>
            ))}
          </ol>
        </>
      ) : null}
    </div>
  );
}

export function RuleTester({ rule }: { rule: RuleDetail }) {
  const [mode, setMode] = useState<'stored' | 'paste'>('stored');
  const [picked, setPicked] = useState('');
  const [pasted, setPasted] = useState('');
  const [result, setResult] = useState<TestResult>();
  const [error, setError] = useState<unknown>();
  const recent = useLoad(() => api<Page<EventSummary>>(withQuery('/admin/events', { limit: 100 })), 'recent');
  const run = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setResult(undefined);
    try {
      const event = mode === 'stored' ? (await api<EventDetail>(`/admin/events/${enc(picked)}`)).payload : JSON.parse(pasted);
      setResult(await api<TestResult>(`/admin/rules/${enc(rule.id)}/test`, { method: 'POST', body: { event } }));
    } catch (err) {
      setError(err);
    }
  };
  const events = recent.data?.items ?? [];
  return (
    <form class="tester" onSubmit={(e) => void run(e)} aria-label="test the rule">
      <fieldset>
        <legend>Event to test with</legend>
        <label><input type="radio" name="mode" checked={mode === 'stored'} onChange={() => setMode('stored')} /> a stored event</label>
        <label><input type="radio" name="mode" checked={mode === 'paste'} onChange={() => setMode('paste')} /> paste an event</label>
      </fieldset>
      {mode === 'stored' ? (
        <label>
          Stored event
          <select name="event" value={picked} onChange={(e) => setPicked((e.target as HTMLSelectElement).value)} required>
            <option value="">choose one of the latest {events.length}</option>
            {events.map((ev) => <option key={ev.id} value={ev.id}>{`${ev.type} · ${ev.id} · ${when(ev.received_at)}`}</option>)}
          </select>
        </label>
      ) : (
        <label class="wide">
          Event JSON
          <textarea name="event-json" rows={8} spellcheck={false} value={pasted} required placeholder='{"id": "evt_1", "type": "task.completed", "data": {"task": {…}}}' onInput={(e) => setPasted((e.target as HTMLTextAreaElement).value)} />
        </label>
      )}
      <button type="submit" class="primary">Test</button>
      <ErrorBox error={error} />
      {result ? <TestOutcome result={result} /> : null}
    </form>
  );
}

export function Backtest({ definition }: { definition: () => unknown }) {
  const [since, setSince] = useState(() => toLocalInput(new Date(Date.now() - 24 * 3600_000).toISOString()));
  const [until, setUntil] = useState('');
  const [report, setReport] = useState<BacktestReport>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const run = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      setReport(await api<BacktestReport>('/admin/rules/backtest', { method: 'POST', body: { rules: [definition()], since: fromLocalInput(since), until: fromLocalInput(until), limit: 500 } }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const differing = report?.events.filter((x) => x.differences.newly_matched.length + x.differences.no_longer_matched.length > 0) ?? [];
  return (
    <form class="backtest" onSubmit={(e) => void run(e)} aria-label="backtest the rule">
      <label>From <input type="datetime-local" value={since} onInput={(e) => setSince((e.target as HTMLInputElement).value)} /></label>
      <label>To <input type="datetime-local" value={until} onInput={(e) => setUntil((e.target as HTMLInputElement).value)} /></label>
      <button type="submit" class="primary" disabled={busy}>{busy ? 'Running…' : 'Run backtest'}</button>
      <ErrorBox error={error} />
      {report ? (
        <div class="backtest-report">
          <p>
            {report.summary.events} stored event(s) replayed: would match {report.summary.would_match}, matched then {report.summary.matched_then}, <strong>{report.summary.differing} would change</strong>.
          </p>
          {differing.length > 0 ? (
            <table>
              <thead><tr><th scope="col">Event</th><th scope="col">Type</th><th scope="col">Change</th><th scope="col">Would send</th></tr></thead>
              <tbody>
                {differing.map((x) => (
                  <tr key={x.event.id}>
                    <td><Link href={to.event(x.event.id)}>{x.event.id}</Link></td>
                    <td>{x.event.type}</td>
                    <td>{x.differences.newly_matched.length ? 'would match now (did not then)' : 'would no longer match'}</td>
                    <td>{x.would_match.flatMap((m) => m.actions).map((a, i) => <RequestView key={i} request={a.request} />)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : <p class="muted">Nothing would change in this range.</p>}
          <ul class="muted">{report.notes.map((n) => <li key={n}>{n}</li>)}</ul>
        </div>
      ) : null}
    </form>
  );
}
