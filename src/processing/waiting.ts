/**
 * Executions that wait (SPEC section 11): cancelled by a later event about the
 * same resource (`options.cancelOn`), collapsed into the execution of the last
 * of a burst (`options.debounce`), or cancelled and resumed by an operator.
 *
 * The execution's row decides every race: a cancel changes it only while it is
 * `waiting` and a resume (step-runner.ts) only while it is `waiting` too, each
 * in its own transaction, so exactly one of them wins (PostgreSQL re-reads the
 * row after the other's commit; SQLite has one writer) and the other sees it
 * did not and records that.
 */
import type { DatabaseKind } from '../database/data-source.js';
import type { Statements } from '../database/statements.js';

export interface CancelledExecution {
  execution: string;
  rule: string;
}

/**
 * Waiting, said both ways (`status = 'waiting' AND resume_at IS NOT NULL`, the same executions): PostgreSQL's index
 * of waiting executions is partial on `resume_at`, so that no index there tests `status` (migration 1766100000000),
 * SQLite's on `status`; each planner uses its own only where the statement implies its predicate.
 */
export const CANCEL_FOR_RESOURCE = `
  UPDATE executions SET status = 'cancelled', cancelled_by = ?, finished_at = ?, resume_at = NULL
  WHERE status = 'waiting' AND resume_at IS NOT NULL AND rule_id = ? AND event_seq IN (SELECT seq FROM events WHERE resource_key = ? AND seq < ?)
  RETURNING id, rule_id`;
const CANCEL_ONE = `
  UPDATE executions SET status = 'cancelled', cancelled_by = ?, finished_at = ?, resume_at = NULL
  WHERE id = ? AND status = 'waiting'
  RETURNING id, rule_id`;
/** The runs that were to go on: never performed now. */
const CANCEL_RUNS = `UPDATE action_runs SET status = 'cancelled', updated_at = ?, lease_owner = NULL, lease_until = NULL
  WHERE execution_id = ? AND status IN ('pending', 'retrying')`;
const NOTE_CANCELLED = 'UPDATE events SET cancelled = ? WHERE seq = ?';
const DEBOUNCE_LOCK = 'SELECT pg_advisory_xact_lock(hashtext(?))';
export const DEBOUNCE_EARLIER = `
  UPDATE executions SET status = 'debounced', debounced_into = ?, finished_at = ?, resume_at = NULL
  WHERE status = 'waiting' AND resume_at IS NOT NULL AND rule_id = ? AND debounce_key = ?
  RETURNING id`;
/** Earlier debounced executions point at the one that runs: the newest (found through idx_executions_debounced_into). */
export const DEBOUNCE_REPOINT = `UPDATE executions SET debounced_into = ? WHERE debounced_into = ?`;
const RESUME_NOW = `UPDATE action_runs SET next_attempt_at = ?, updated_at = ?
  WHERE execution_id = ? AND type = 'delay' AND status = 'pending'
    AND EXISTS (SELECT 1 FROM executions x WHERE x.id = action_runs.execution_id AND x.status = 'waiting')`;

/** Cancels the rules' waiting executions started by earlier events about `resourceKey`; notes them on the cancelling event. */
export async function cancelWaitingFor(sql: Statements, event: { seq: number; event_id: string; resource_key: string | null }, ruleIds: readonly string[], now: string): Promise<CancelledExecution[]> {
  if (event.resource_key === null || ruleIds.length === 0) return [];
  const cancelled: CancelledExecution[] = [];
  for (const rule of ruleIds) {
    const rows = await sql.rows<{ id: string; rule_id: string }>(CANCEL_FOR_RESOURCE, [event.event_id, now, rule, event.resource_key, event.seq]);
    for (const row of rows) {
      await sql.run(CANCEL_RUNS, [now, row.id]);
      cancelled.push({ execution: row.id, rule: row.rule_id });
    }
  }
  if (cancelled.length > 0) await sql.run(NOTE_CANCELLED, [JSON.stringify(cancelled), event.seq]);
  return cancelled;
}

/** An operator cancels a waiting execution; false when it was not waiting. */
export async function cancelExecution(sql: Statements, executionId: string, by: string, now: string): Promise<boolean> {
  const rows = await sql.rows<{ id: string }>(CANCEL_ONE, [by, now, executionId]);
  if (rows.length === 0) return false;
  await sql.run(CANCEL_RUNS, [now, executionId]);
  return true;
}

/** An operator resumes a waiting execution now: its delay becomes due; false when it was not waiting. */
export async function resumeExecution(sql: Statements, executionId: string, now: string): Promise<boolean> {
  return (await sql.run(RESUME_NOW, [now, now, executionId])) > 0;
}

/**
 * A matched event of a debounced rule: the rule's waiting execution with the
 * same key (the previous event's) becomes `debounced`, pointing at `into`,
 * the new one, which waits in its place. Serialised per key on PostgreSQL.
 */
export async function debounceEarlier(sql: Statements, kind: DatabaseKind, ruleId: string, key: string, into: string, now: string): Promise<void> {
  if (kind === 'postgres') await sql.rows(DEBOUNCE_LOCK, [`debounce:${ruleId}:${key}`]);
  const earlier = await sql.rows<{ id: string }>(DEBOUNCE_EARLIER, [into, now, ruleId, key]);
  for (const { id } of earlier) {
    await sql.run(CANCEL_RUNS, [now, id]);
    await sql.run(DEBOUNCE_REPOINT, [into, id]);
  }
}
