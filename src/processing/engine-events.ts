/**
 * Events of the engine's own (SPEC section 11), stored in the transaction
 * that records what they report, and then evaluated, explained and listed like
 * the service's: `engine.action_run.failed` when an action run fails for good,
 * `engine.event.loop_blocked` when loop protection stops a chain. An engine
 * event never causes another engine event about itself: what happens while
 * handling one reports nothing further. Ids follow from what they report, so
 * a commit made again stores nothing twice.
 */
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import type { Statements } from '../database/statements.js';
import type { ClaimedActionRun, ClaimedEvent, LoadedExecution } from './work.js';

export const ENGINE_EVENT_PREFIX = 'engine.';

const INSERT_ENGINE_EVENT = `
  INSERT INTO events (event_id, type, resource_key, status, source, payload, depth, received_at, attempts, next_attempt_at, seen_resource)
  VALUES (?, ?, NULL, 'received', 'engine', ?, ?, ?, 0, ?, ?)
  ON CONFLICT (event_id) DO NOTHING`;

export function isEngineEvent(type: string): boolean {
  return type.startsWith(ENGINE_EVENT_PREFIX);
}

async function store(sql: Statements, id: string, type: string, data: Record<string, unknown>, depth: number, now: string): Promise<void> {
  const payload = JSON.stringify({ id, type, created_at: now, data });
  await sql.run(INSERT_ENGINE_EVENT, [id, type, payload, depth, now, now, true]);
}

/** An action run failed for good: `data.action_run`, `data.execution`, `data.rule_id`, `data.error`. */
export async function emitActionRunFailed(sql: Statements, claim: ClaimedActionRun, execution: LoadedExecution, result: AttemptOutcome, now: string): Promise<void> {
  if (isEngineEvent(execution.eventType)) return;
  const id = `engine:action_run.failed:${claim.id}:${claim.attempts}`;
  await store(sql, id, 'engine.action_run.failed', {
    action_run: { id: claim.id, type: claim.type, action_id: claim.action_id, position: claim.position, attempts: claim.attempts, item_index: claim.item_index ?? null },
    execution: { id: execution.id, event_id: execution.eventId, event_type: execution.eventType },
    rule_id: execution.ruleId,
    error: { code: result.errorCode ?? 'failed', message: result.errorMessage ?? null, status: result.responseStatus ?? null },
  }, execution.eventDepth, now);
}

/** Loop protection stopped an event: `data.event`. */
export async function emitLoopBlocked(sql: Statements, claim: ClaimedEvent, depth: number, now: string): Promise<void> {
  if (isEngineEvent(claim.type)) return;
  await store(sql, `engine:event.loop_blocked:${claim.event_id}`.slice(0, 255), 'engine.event.loop_blocked', {
    event: { id: claim.event_id, type: claim.type, resource: claim.resource_key, depth },
  }, 0, now);
}
