/**
 * How an execution moves from one entry of its rule's `actions` to the next
 * (SPEC sections 5 and 11), inside the transaction that records how the
 * previous one ended: the next entry's run is inserted, or the execution is
 * closed. An entry is an action (one run; with `forEach`, a run that expands
 * into one run per item, and the execution goes on once every item's run has
 * ended), a `delay` (a run due when the delay ends) or a `check` (a run that
 * evaluates its conditions when reached).
 */
import type { DatabaseKind } from '../database/data-source.js';
import type { Statements } from '../database/statements.js';
import { isStep } from '../rules/rule.types.js';
import { newActionRun } from './new-action-run.js';
import { FAILED_RUN } from './runs-in-flight.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

const INSERT_RUN = `
  INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, action_id, type, status,
                           attempts, next_attempt_at, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)`;
const COUNT_FAILED = `SELECT COUNT(*) AS n FROM action_runs a WHERE a.execution_id = ? AND ${FAILED_RUN}`;
/** Only an execution still under way is closed: one cancelled or stopped meanwhile keeps its status. */
const FINISH_EXECUTION = `UPDATE executions SET status = ?, finished_at = ?, error = ?, resume_at = NULL WHERE id = ? AND status IN ('running', 'waiting')`;
const LOCK_EXECUTION = 'SELECT id FROM executions WHERE id = ? FOR UPDATE';
const ITEMS_OF_POSITION = `
  SELECT SUM(CASE WHEN status IN ('pending', 'running', 'retrying') THEN 1 ELSE 0 END) AS open,
         SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed
  FROM action_runs WHERE execution_id = ? AND position = ? AND item_index IS NOT NULL`;

/** How the entry at `claim.position` ended. */
export interface EntryEnd {
  failed: boolean;
  /** For the execution's error when this failure ends it. */
  errorCode?: string | null;
  errorMessage?: string | null;
}

/**
 * After a run ended (for good): start the next entry, or close the execution.
 * An item of a forEach moves the execution on only when it is the last of its
 * entry's items to end (the execution's row is locked meanwhile on PostgreSQL,
 * so two items ending at once cannot both miss it).
 */
export async function advanceExecution(sql: Statements, kind: DatabaseKind, claim: ClaimedActionRun, end: EntryEnd, now: string, execution: LoadedExecution): Promise<void> {
  let failed = end.failed;
  if (claim.item_index !== null && claim.item_index !== undefined) {
    if (kind === 'postgres') await sql.rows(LOCK_EXECUTION, [execution.id]);
    const [items] = await sql.rows<{ open: number | string | null; failed: number | string | null }>(ITEMS_OF_POSITION, [execution.id, claim.position]);
    if (Number(items?.open ?? 0) > 0) return;
    failed = Number(items?.failed ?? 0) > 0;
  }
  const entry = execution.rule.actions[claim.position];
  const goOn = !failed || entry?.continueOnError === true;
  const next = claim.position + 1;
  if (goOn && next < execution.rule.actions.length) {
    await insertEntry(sql, execution, next, claim.resource_key ?? null, now);
    return;
  }
  const failures = onlyRun(claim, execution) ? Number(failed) : await countFailed(sql, execution.id);
  const error = failed
    ? `action ${claim.action_id ?? `#${claim.position + 1}`} (${claim.type}) failed${end.errorCode ? `: ${end.errorCode}: ${end.errorMessage}` : ''}`
    : failures > 0 ? `${failures} action(s) failed` : null;
  await finishExecution(sql, execution.id, failures > 0 || failed ? 'failed' : 'succeeded', now, error);
}

async function countFailed(sql: Statements, executionId: string): Promise<number> {
  const [{ n }] = await sql.rows<{ n: number | string }>(COUNT_FAILED, [executionId]);
  return Number(n);
}

/** The run is its execution's only one (a rule of one action, not forEach): it alone says whether any failed. */
function onlyRun(claim: ClaimedActionRun, execution: LoadedExecution): boolean {
  return execution.rule.actions.length === 1 && (claim.item_index === null || claim.item_index === undefined);
}

/**
 * The run of the entry at `position`, due now. Steps (delay, check) are about
 * no resource: a waiting execution must not hold back later events about its
 * event's resource (per-resource order waits for unfinished runs on it).
 */
export async function insertEntry(sql: Statements, execution: LoadedExecution, position: number, resourceKey: string | null, now: string): Promise<void> {
  const step = isStep(execution.rule.actions[position]!.type);
  const run = newActionRun(execution, execution.rule, position, step ? null : resourceKey, now);
  await sql.run(INSERT_RUN, [run.id, run.executionId, run.eventSeq, run.resourceKey, run.ruleId, position, run.actionId, run.type, now, now, now]);
}

export async function finishExecution(sql: Statements, executionId: string, status: string, now: string, error: string | null): Promise<void> {
  await sql.run(FINISH_EXECUTION, [status, now, error, executionId]);
}
