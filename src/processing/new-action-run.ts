/**
 * An action run's identity and first row. The id, which is also its
 * Idempotency-Key, follows from what the run is: the event, the rule and the
 * action's position (and, for one item of a forEach, the item's index). If an evaluation is ever done again (its commit lost to a
 * power cut after the request went out), the action gets the same key and the
 * service applies it once.
 */
import { createHash } from 'node:crypto';
import type { ActionRunEntity } from '../database/action-run.entity.js';
import type { ExecutionEntity } from '../database/execution.entity.js';
import type { RuleSnapshot } from './rule-snapshot.js';

export function actionRunId(eventId: string, ruleId: string, position: number, itemIndex?: number): string {
  const item = itemIndex === undefined ? '' : `\u0000item ${itemIndex}`;
  const hex = createHash('sha256').update(`${eventId}\u0000${ruleId}\u0000${position}${item}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export function newActionRun(
  execution: Pick<ExecutionEntity, 'id' | 'eventSeq' | 'eventId' | 'ruleId'>,
  rule: RuleSnapshot,
  position: number,
  resourceKey: string | null,
  now: string,
): Partial<ActionRunEntity> {
  const action = rule.actions[position];
  return {
    id: actionRunId(execution.eventId, execution.ruleId, position),
    executionId: execution.id,
    eventSeq: execution.eventSeq,
    resourceKey,
    ruleId: execution.ruleId,
    position,
    actionId: action.id ?? null,
    type: action.type,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: now,
    createdAt: now,
    updatedAt: now,
  };
}
