/**
 * PostgreSQL: the outcomes of action runs that finish together, recorded with
 * a few statements for the whole batch rather than four or five per run (on
 * PostgreSQL every statement is a round trip, and under load each waits behind
 * the rest of the process's work). The steps are those of one run
 * (execution-progress.ts), in the same transaction, one statement each: the
 * runs' outcomes (only where this worker still holds the lease), the resources
 * they touched, the executions not handed over with their runs, and the end of
 * every execution whose last action succeeded. Anything else (a retry has
 * nothing more to do; a failure, a next entry, an item of a forEach) goes on
 * run by run through `advance`.
 */
import { touchedResource } from '../actions/action-types.js';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { planEachTime, planEachTimeByKey, planOnceByKey } from '../database/planned-once.js';
import type { Statements } from '../database/statements.js';
import { unindexed } from '../database/sql.js';
import { guardedRowsOf, unnestOf } from './batched-statements.js';
import { FAILED_RUN } from './runs-in-flight.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

export interface Outcome {
  claim: ClaimedActionRun;
  owner: string;
  result: AttemptOutcome;
  now: string;
  loaded?: LoadedExecution;
}

const RECORD_COLUMNS = ['status', 'next_attempt_at', 'updated_at', 'request', 'response_status', 'response', 'error_code', 'error_message', 'id', 'owner'];
const RECORD_TYPES = ['text', 'text', 'text', 'text', 'int', 'text', 'text', 'text', 'text', 'text'];
// Each batch UPDATE below also names its keys as `= ANY`, so that the planner probes the primary key (see
// event-commit.ts FINISH_MANY): joined only through `t`, it ANDed bitmaps of whole indexes into them, such as every
// run leased since the last vacuum (idx_action_runs_leased) for a batch of 32 outcomes. The status is `unindexed`
// (sql.ts): as a plain condition, the outcomes' UPDATE walked idx_action_runs_due through every running run for each
// batch, about 100 rows read per event. Their guards are written against `t` (batched-statements.ts `guardedRowsOf`):
// against constants, they had the planner count one row to update and join the batch to it as a nested loop.
export const RECORD_MANY = `
  UPDATE action_runs r SET status = t.status, lease_owner = NULL, lease_until = NULL, next_attempt_at = t.next_attempt_at,
                           updated_at = t.updated_at, request = COALESCE(t.request, r.request), response_status = t.response_status,
                           response = t.response, error_code = t.error_code, error_message = t.error_message
  FROM ${guardedRowsOf(RECORD_COLUMNS, RECORD_TYPES, { was: "'running'" })}
  WHERE r.id = t.id AND r.lease_owner = t.owner AND ${unindexed('r.status')} = t.was AND r.id = ANY(?::text[])
  RETURNING r.id`;

/** The depth of the run's event: from its execution when it is in hand (`t.depth`), else read from the event. */
const PROVENANCE_MANY = `
  INSERT INTO resource_provenance (resource_key, depth, action_run_id, rule_id, changed_at)
  SELECT t.resource_key, COALESCE(t.depth, (SELECT depth FROM events WHERE seq = t.event_seq), 0), t.action_run_id, t.rule_id, t.changed_at
  FROM ${unnestOf(['resource_key', 'event_seq', 'depth', 'action_run_id', 'rule_id', 'changed_at'], ['text', 'int', 'int', 'text', 'text', 'text'])}
  ON CONFLICT (resource_key) DO UPDATE SET depth = excluded.depth, action_run_id = excluded.action_run_id,
                                           rule_id = excluded.rule_id, changed_at = excluded.changed_at`;

/**
 * As execution-steps.ts closes an execution after its last action: failed if any of its runs failed. Planned once
 * per session (planned-once.ts), as the outcomes' UPDATE is: the executions found by key (`= ANY`) and their failed
 * runs counted once for the whole batch (`failed`, through idx_action_runs_failed), each joined to the batch by hash.
 * Counted per execution instead (a LATERAL subquery), a plan made once is a nested loop over the batch, and the `=
 * ANY` then compared every execution with every other; so it was planned for each batch, 0.5 ms of the server's
 * planning a commit, 15 µs an event end to end (session 50, pg_stat_statements).
 */
export const FINISH_EXECUTIONS = `
  WITH failed AS MATERIALIZED (
    SELECT a.execution_id, COUNT(*) AS n FROM action_runs a WHERE a.execution_id = ANY(?::text[]) AND ${FAILED_RUN} GROUP BY a.execution_id)
  UPDATE executions x SET status = CASE WHEN f.n > 0 THEN 'failed' ELSE 'succeeded' END, finished_at = t.finished_at,
                          error = CASE WHEN f.n > 0 THEN f.n || ' action(s) failed' ELSE NULL END, resume_at = NULL
  FROM ${guardedRowsOf(['id', 'finished_at'], ['text', 'text'], { running: "'running'", waiting: "'waiting'" })}
  LEFT JOIN failed f ON f.execution_id = t.id
  WHERE x.id = t.id AND ${unindexed('x.status')} IN (t.running, t.waiting) AND x.id = ANY(?::text[])`;

export interface OutcomeSteps {
  /** Executions by id, for the runs not handed over with theirs. */
  load(sql: Statements, ids: string[]): Promise<Map<string, LoadedExecution>>;
  /** Told of each outcome recorded (metrics, logs). */
  recorded(outcome: Outcome): void;
  /** The rest of one run's steps after its outcome and provenance are recorded. */
  advance(sql: Statements, outcome: Outcome, execution: LoadedExecution): Promise<void>;
}

/** Records a batch; for each outcome, whether it was recorded (false: the lease was lost). */
export async function recordOutcomes(sql: Statements, batch: Outcome[], steps: OutcomeSteps): Promise<boolean[]> {
  // The outcomes and the provenance, found by key, are planned once per session (0.3 ms of planning a commit before);
  // the rest as before, each time: planned once, FINISH_EXECUTIONS compared every execution of a batch with every
  // other (a nested loop) and counted the failed runs of each through the index of every run by status.
  planOnceByKey(sql);
  const changed = await recordRuns(sql, batch);
  const recorded = batch.filter((o) => changed.has(o.claim.id));
  for (const outcome of recorded) steps.recorded(outcome);
  await saveProvenances(sql, recorded);
  planEachTime(sql);
  const going = recorded.filter((o) => o.result.status !== 'retrying');
  const missing = [...new Set(going.filter((o) => o.loaded === undefined).map((o) => o.claim.execution_id))];
  const loaded = missing.length > 0 ? await steps.load(sql, missing) : new Map<string, LoadedExecution>();
  const finished: Array<[string, string]> = [];
  for (const outcome of going) {
    const execution = outcome.loaded ?? loaded.get(outcome.claim.execution_id);
    if (!execution) throw new Error(`execution ${outcome.claim.execution_id} of action run ${outcome.claim.id} is missing`);
    if (endsWithSuccess(outcome, execution)) finished.push([execution.id, outcome.now]);
    else await steps.advance(sql, outcome, execution);
  }
  if (finished.length > 0) {
    const ids = finished.map(([id]) => id);
    planOnceByKey(sql);
    await sql.queue(FINISH_EXECUTIONS, [ids, ids, finished.map(([, at]) => at), ids]);
    // What follows in the commit (the lease of the events it lets go, execution-progress.ts) is planned for its
    // values, found by key, as it was when this statement was too.
    planEachTimeByKey(sql);
  }
  return batch.map((o) => changed.has(o.claim.id));
}

/**
 * The request to write with an outcome (its statements keep the run's own when given null): none when the run holds
 * it already (`requestJson`, the text read from the run or written with it), so that it is not bound and written a
 * second time; else the request the attempt rendered, or none when it rendered none.
 */
export function requestToRecord(result: AttemptOutcome): string | null {
  if (result.requestJson !== undefined || result.request === undefined) return null;
  return JSON.stringify(result.request);
}

/**
 * The response to write with an outcome: the service's text as it came when it was JSON (`responseJson`; read back
 * through safeJsonParse like any stored JSON), else the response written out, or none.
 */
export function responseToRecord(result: AttemptOutcome): string | null {
  if (result.responseJson !== undefined) return result.responseJson;
  return result.response === undefined ? null : JSON.stringify(result.response);
}

async function recordRuns(sql: Statements, batch: Outcome[]): Promise<Set<string>> {
  const rows = batch.map(({ claim, owner, result, now }) => [
    result.status, result.nextAttemptAt ?? now, now, requestToRecord(result), result.responseStatus ?? null,
    responseToRecord(result), result.errorCode ?? null, result.errorMessage ?? null, claim.id, owner,
  ]);
  const columns = RECORD_TYPES.map((_type, column) => rows.map((row) => row[column]));
  const changed = await sql.rows<{ id: string }>(RECORD_MANY, [...columns, batch.map(({ claim }) => claim.id)]);
  return new Set(changed.map((row) => row.id));
}

/** The resources the succeeded runs touched; of two runs touching one resource, the later in the batch wins. */
async function saveProvenances(sql: Statements, recorded: Outcome[]): Promise<void> {
  const rows = new Map<string, unknown[]>();
  for (const { claim, result, now, loaded } of recorded) {
    if (result.status !== 'succeeded' || !result.request) continue;
    const key = touchedResource(claim.type, result.request, result.response);
    if (key) rows.set(key, [key, claim.event_seq, loaded?.eventDepth ?? null, claim.id, claim.rule_id, now]);
  }
  if (rows.size === 0) return;
  const values = [...rows.values()];
  await sql.queue(PROVENANCE_MANY, [0, 1, 2, 3, 4, 5].map((column) => values.map((row) => row[column])));
}

/** A plain run (no forEach item) of its rule's last action that succeeded: its execution ends with it. */
function endsWithSuccess({ claim, result }: Outcome, execution: LoadedExecution): boolean {
  return result.status === 'succeeded' && (claim.item_index === null || claim.item_index === undefined) && claim.position + 1 >= execution.rule.actions.length;
}
