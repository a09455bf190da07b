/**
 * PostgreSQL: the events held behind creates in flight (parked-events.ts), decided in the commit that records the
 * outcomes that let them go, in one statement at its end, as intake's statement decides the events it stores
 * (made-at-intake.ts). Without it each such event was written twice: stored `received` by intake, then decided by a
 * commit of the event loop's own once the creates ended, after that loop read the resources' snapshots and
 * provenance again.
 *
 * Nothing is read first. Intake evaluated the event on what its statement found (no provenance for the resource, and
 * no snapshot where the evaluation read one: EventProcessor.heldAtIntake), and kept that evaluation with the parked
 * event (`heldEvaluation`); the statement stores decided only the events of which that is still so once the outcomes
 * before it in the commit are written (a create whose outcome named the event's resource wrote its provenance: that
 * event is the engine's own doing, and goes to the event loop, which evaluates it on what it reads). Written with
 * it, for those it stores decided: their snapshots, the events waiting about their resources marked seen (as the
 * loop's commit marks them after a first snapshot), and their executions, first runs and provenance (MadeAtIntake's
 * definitions over `stored`). Its answer (the seqs it decided) comes with the COMMIT's (Statements.queueRows): no
 * round trip more in the commit.
 */
import type { EventEnvelope } from '../intake/envelope.js';
import { safeJsonParse } from '../json.js';
import type { Metrics } from '../observability/metrics.js';
import { planOnceByKey } from '../database/planned-once.js';
import type { Statements } from '../database/statements.js';
import { unindexed } from '../database/sql.js';
import { guardedRowsOf } from './batched-statements.js';
import { FINISH_MANY_COLUMNS, FINISH_MANY_TYPES, finishColumns, newExecutions, unseenWaiting, type EventCommit } from './event-commit.js';
import { countsWhatCameBefore, MadeAtIntake } from './made-at-intake.js';
import type { ClaimedEvent, CreatedRun, HandOff, PreparedEvent } from './work.js';

const COLUMNS = [...FINISH_MANY_COLUMNS, 'resource_key', 'snapshot', 'read_snapshot'];
const TYPES = [...FINISH_MANY_TYPES, 'text', 'text', 'bool'];

/**
 * `assumed`: the rows whose evaluation still holds (the resource has no provenance, nor a snapshot where the
 * evaluation read one; each probed through its primary key, LATERAL … LIMIT 1, as intake's statement probes them);
 * `stored`: those of them still leased to this process and waiting, finished as FINISH_MANY finishes them; then their
 * snapshots, and the events about their resources stored after them and not yet seen (as MARK_SEEN_MANY finds them:
 * by resource key, with `OFFSET 0`; none of `stored`'s own rows, which this statement's other parts see as they were).
 * Each of `assumed` probes the primary key of events (a nested loop; the statement is planned once by key): with
 * FINISH_MANY's `seq = ANY(…)` as well, that probe walked the whole array for every row, 0.1 ms a row (auto_explain),
 * and planned for its values at every commit it cost 30 µs of the server's planning an event (session 75).
 * Placeholders: COLUMNS as arrays, then `made`'s.
 */
function letGoSql(made: string): string {
  return `WITH assumed AS MATERIALIZED (
    SELECT t.* FROM ${guardedRowsOf(COLUMNS, TYPES, { was: "'received'" })}
    LEFT JOIN LATERAL (SELECT true AS touched FROM resource_provenance p WHERE p.resource_key = t.resource_key LIMIT 1) p ON true
    LEFT JOIN LATERAL (SELECT true AS seen FROM resource_snapshots s WHERE s.resource_key = t.resource_key LIMIT 1) s ON true
    WHERE p.touched IS NULL AND (s.seen IS NULL OR NOT t.read_snapshot)),
  stored AS (
    UPDATE events e SET status = t.status, depth = t.depth, self_caused = t.self_caused, error = t.error, processed_at = t.processed_at,
                        attempts = t.attempts, next_attempt_at = t.next_attempt_at, explanation = t.explanation, lease_owner = NULL, lease_until = NULL
    FROM assumed t
    WHERE e.seq = t.seq AND e.lease_owner = t.owner AND ${unindexed('e.status')} = t.was
    RETURNING e.seq, e.event_id, e.resource_key, t.snapshot, t.processed_at, true AS finished),
  snapshots AS (
    INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at)
    SELECT s.resource_key, s.snapshot, s.seq, s.processed_at FROM stored s WHERE s.snapshot IS NOT NULL
    ON CONFLICT (resource_key) DO UPDATE SET payload = excluded.payload, event_seq = excluded.event_seq, updated_at = excluded.updated_at),
  marked AS (
    UPDATE events SET seen_resource = TRUE WHERE seq = ANY(ARRAY(
      SELECT w.seq FROM stored s CROSS JOIN LATERAL (
        SELECT u.seq FROM events u
        WHERE u.resource_key = s.resource_key AND u.seq > s.seq AND ${unseenWaiting('u.')}
        OFFSET 0) w)))${made ? `,${made}` : ''}
  SELECT seq FROM stored`;
}

/**
 * The events let go, as the commit sent them: `sent`, to the statement, which answers (once the commit is done) which
 * it decided and what those made; `rest`, to the event loop.
 */
export interface LetGoSent {
  sent: ClaimedEvent[];
  rest: ClaimedEvent[];
  answer: Promise<{ decided: ClaimedEvent[]; made: CreatedRun[] }>;
}

/**
 * Of the events let go, those intake evaluated (`heldEvaluation`) and whose evaluation asks nothing of what came
 * before (no throttle or debounce: the loop's commit reads those), one a resource and each making only what the
 * statement writes (MadeAtIntake.make): queued at the end of the commit as one statement (`sent`); `rest`, the
 * others, for the event loop. Their first runs are leased to `handOff` as far as it has room; what it decides is
 * counted in `metrics` once the statement has answered.
 */
export async function sendLetGo(
  sql: Statements,
  { committer, metrics }: { committer: EventCommit; metrics: Metrics },
  events: ClaimedEvent[],
  now: string,
  handOff: HandOff,
): Promise<LetGoSent> {
  const rest: ClaimedEvent[] = [];
  const sent: ClaimedEvent[] = [];
  const rows: unknown[][] = [];
  const made = new MadeAtIntake();
  const keys = new Set<string>();
  for (const claim of events) {
    const held = claim.heldEvaluation;
    const key = claim.resource_key;
    const kept = held !== undefined && key !== null && !keys.has(key) && !held.verdict.matched.some(countsWhatCameBefore) ? await make(made, committer, claim, now, handOff) : undefined;
    if (kept === undefined) rest.push(claim);
    else {
      keys.add(key!);
      sent.push(claim);
      rows.push([...kept.finish, claim.seq, handOff.owner, key, kept.snapshot ?? null, held!.readSnapshot]);
    }
  }
  if (sent.length === 0) return { sent, rest, answer: Promise.resolve({ decided: [], made: [] }) };
  const columns = TYPES.map((_type, i) => rows.map((row) => row[i] ?? null));
  const written = made.written();
  planOnceByKey(sql);
  const stored = sql.queueRows<{ seq: number | string }>(letGoSql(written?.sql ?? ''), [...columns, ...(written?.params ?? [])]);
  const answer = stored.then((decided) => {
    const seqs = new Set(decided.map((row) => Number(row.seq)));
    const events = sent.filter((claim) => seqs.has(claim.seq));
    const runs = events.flatMap((event) => made.madeBy(event.event_id, event.seq));
    // Counted as the loop's commit counts its own: the rules' matches, and the events.
    for (const { execution } of runs) metrics.ruleMatched(execution.ruleId, 'matched');
    for (const event of events) metrics.eventProcessed(event.type, event.heldEvaluation!.verdict.status);
    return { decided: events, made: runs };
  });
  answer.catch(() => undefined); // the commit fails with it
  return { sent, rest, answer };
}

/** The event's rows made as the loop's commit makes them (undefined: it would write anything else), and its finished columns. */
async function make(made: MadeAtIntake, committer: EventCommit, claim: ClaimedEvent, now: string, handOff: HandOff) {
  const { verdict, resource } = claim.heldEvaluation!;
  const envelope = claim.envelope ?? (safeJsonParse(claim.payload) as EventEnvelope);
  const prepared: PreparedEvent = { claim, verdict, resource, envelope, resourceKnown: false };
  const executions = newExecutions(verdict);
  const kept = await made.make(claim.event_id, (into) => committer.recordAtIntake(into, prepared, executions, now, handOff, false));
  return kept && { snapshot: kept.snapshot, finish: finishColumns(prepared, executions, now) };
}
