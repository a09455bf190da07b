/**
 * What the step runner (step-runner.ts) writes: a step's end, guarded by the
 * run's lease like an action's outcome; a delay's wait and its resume; the
 * runs of a forEach's items.
 */
import type { ActionRunStatus } from '../database/action-run.entity.js';
import type { Database } from '../database/database.service.js';
import { statementsOf, type Statements } from '../database/statements.js';
import { advanceExecution } from './execution-steps.js';
import { actionRunId } from './new-action-run.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

export interface StepEnd {
  status: 'succeeded' | 'failed' | 'retrying';
  response?: unknown;
  errorCode?: string;
  errorMessage?: string;
  nextAttemptAt?: string;
  /** A check that did not pass: the execution ends `stopped`. */
  stop?: boolean;
  /** A forEach's items: one run each. */
  items?: unknown[];
}

const RECORD_END = `
  UPDATE action_runs SET status = ?, lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, updated_at = ?,
                         response = ?, error_code = ?, error_message = ?
  WHERE id = ? AND lease_owner = ? AND status = 'running'`;
/** The run goes back to the database, due when the delay ends; reaching a delay is not an attempt. */
const WAIT = `
  UPDATE action_runs SET status = 'pending', lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, updated_at = ?,
                         request = ?, attempts = attempts - 1
  WHERE id = ? AND lease_owner = ? AND status = 'running'`;
const EXECUTION_WAITS = `UPDATE executions SET status = 'waiting', resume_at = ? WHERE id = ? AND status = 'running'`;
/** The resume wins only over a waiting execution: a cancel or a debounce that came first keeps it. */
const EXECUTION_RESUMES = `UPDATE executions SET status = 'running', resume_at = NULL WHERE id = ? AND status = 'waiting'`;
const RUN_ENDS = `UPDATE action_runs SET status = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ? AND status = 'running'`;
const RUN_CANCELLED = `UPDATE action_runs SET status = 'cancelled' WHERE id = ?`;
const INSERT_ITEM = `
  INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, action_id, type, status,
                           attempts, next_attempt_at, created_at, updated_at, item_index, item)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?)`;

export class StepRecords {
  constructor(private readonly db: Database) {}

  /** The step's end, while this worker still holds the run; false when the lease was lost. */
  async record(sql: Statements, claim: ClaimedActionRun, owner: string, end: StepEnd, now: string): Promise<boolean> {
    const response = end.response === undefined ? null : JSON.stringify(end.response);
    const changed = await sql.run(RECORD_END, [end.status, end.nextAttemptAt ?? now, now, response, end.errorCode ?? null, end.errorMessage ?? null, claim.id, owner]);
    return changed > 0;
  }

  /** A delay reached: due at `resumeAt`, the execution `waiting` meanwhile. */
  async wait(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, resumeAt: string, now: string): Promise<ActionRunStatus> {
    return this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      if (!(await sql.run(WAIT, [resumeAt, now, JSON.stringify({ resume_at: resumeAt }), claim.id, owner]))) return 'running';
      await sql.run(EXECUTION_WAITS, [resumeAt, execution.id]);
      return 'pending';
    });
  }

  /** A delay that is due: the execution goes on, or, cancelled or debounced meanwhile, the run is `cancelled`. */
  async resume(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, now: string): Promise<ActionRunStatus> {
    return this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      if (!(await sql.run(RUN_ENDS, ['succeeded', now, claim.id, owner]))) return 'running';
      if (!(await sql.run(EXECUTION_RESUMES, [execution.id]))) {
        await sql.run(RUN_CANCELLED, [claim.id]);
        return 'cancelled';
      }
      await advanceExecution(sql, this.db.kind, claim, { failed: false }, now, execution);
      return 'succeeded';
    });
  }

  /** One run per item, at the forEach's position, each with its own id (its Idempotency-Key). */
  async insertItems(sql: Statements, claim: ClaimedActionRun, execution: LoadedExecution, items: unknown[], now: string): Promise<void> {
    for (const [index, item] of items.entries()) {
      await sql.run(INSERT_ITEM, [
        actionRunId({ seq: execution.eventSeq, id: execution.eventId }, execution.ruleId, claim.position, index), execution.id, execution.eventSeq, claim.resource_key ?? null,
        execution.ruleId, claim.position, claim.action_id, claim.type, now, now, now, index, JSON.stringify(item ?? null),
      ]);
    }
  }
}
