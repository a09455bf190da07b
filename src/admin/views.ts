/** How stored rows are shown by the admin API (snake_case, JSON columns parsed). */
import type { ActionRunEntity } from '../database/action-run.entity.js';
import type { EventEntity } from '../database/event.entity.js';
import { safeJsonParse } from '../json.js';
import type { ExecutionEntity } from '../database/execution.entity.js';

export function parsed(text: string | null): unknown {
  if (text === null) return null;
  try {
    return safeJsonParse(text);
  } catch {
    return text;
  }
}

export function eventSummary(e: EventEntity) {
  return {
    id: e.eventId,
    type: e.type,
    status: e.status,
    source: e.source,
    resource: e.resourceKey,
    depth: e.depth,
    attempts: e.attempts,
    received_at: e.receivedAt,
    processed_at: e.processedAt,
    replay_of: e.replayOf,
    error: e.error,
  };
}

export function actionRunView(r: ActionRunEntity) {
  return {
    id: r.id,
    execution_id: r.executionId,
    rule: r.ruleId,
    position: r.position,
    action_id: r.actionId,
    type: r.type,
    status: r.status,
    attempts: r.attempts,
    next_attempt_at: r.status === 'retrying' || r.status === 'pending' ? r.nextAttemptAt : null,
    request: parsed(r.request),
    response_status: r.responseStatus,
    response: parsed(r.response),
    error: r.errorCode === null ? null : { code: r.errorCode, message: r.errorMessage },
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    item_index: r.itemIndex,
    item: r.item === null ? null : parsed(r.item),
  };
}

export function executionView(x: ExecutionEntity, runs?: ActionRunEntity[]) {
  return {
    id: x.id,
    event_id: x.eventId,
    rule: x.ruleId,
    rule_version: x.ruleVersion,
    status: x.status,
    error: x.error,
    conditions: parsed(x.conditions),
    created_at: x.createdAt,
    finished_at: x.finishedAt,
    resume_at: x.resumeAt,
    cancelled_by: x.cancelledBy,
    debounce_key: x.debounceKey,
    debounced_into: x.debouncedInto,
    ...(runs
      ? { actions: runs.filter((r) => r.executionId === x.id).sort(byPositionThenItem).map(actionRunView) }
      : {}),
  };
}

/** An execution's runs in the order of its rule's entries; a forEach's expansion before its items, the items by index. */
function byPositionThenItem(a: ActionRunEntity, b: ActionRunEntity): number {
  return a.position - b.position || (a.itemIndex ?? -1) - (b.itemIndex ?? -1);
}
