/**
 * Why an event is still `received`, in the terms of the work queue's claim
 * (processing/work-queue.ts): it is being evaluated now; its evaluation was
 * postponed (a lookup failed) until a time; an earlier event about the same
 * resource waits before it; action runs of an earlier event on that resource
 * have not finished; an action that creates resources is in flight and the
 * event's resource is new to the engine (the causal barrier); or none of these,
 * and the workers have simply not taken it yet.
 */
import type { EntityManager } from 'typeorm';
import { CREATING_ACTIONS } from '../actions/action-types.js';
import type { EventEntity } from '../database/event.entity.js';
import { queryRows } from '../database/sql.js';

export type WaitingReason =
  | { kind: 'evaluating'; lease_until: string }
  | { kind: 'postponed'; until: string; attempts: number; error: string | null }
  | { kind: 'behind_event'; event_id: string; resource: string }
  | { kind: 'behind_action_runs'; resource: string; runs: Array<{ id: string; type: string; status: string; rule: string; event_id: string; next_attempt_at: string }> }
  | { kind: 'causal_barrier'; runs: Array<{ id: string; type: string; rule: string; created_at: string }> }
  | { kind: 'queued' };

const UNFINISHED = `('pending', 'running', 'retrying')`;

export async function whyWaiting(manager: EntityManager, event: EventEntity, now: Date): Promise<WaitingReason[]> {
  if (event.status !== 'received') return [];
  const at = now.toISOString();
  const reasons: WaitingReason[] = [];
  if (event.leaseUntil !== null && event.leaseUntil > at) reasons.push({ kind: 'evaluating', lease_until: event.leaseUntil });
  if (event.nextAttemptAt > at) reasons.push({ kind: 'postponed', until: event.nextAttemptAt, attempts: event.attempts, error: event.error });
  if (event.resourceKey !== null) reasons.push(...(await behindResource(manager, event)));
  const barrier = await causalBarrier(manager, event);
  if (barrier) reasons.push(barrier);
  return reasons.length > 0 ? reasons : [{ kind: 'queued' }];
}

async function behindResource(manager: EntityManager, event: EventEntity): Promise<WaitingReason[]> {
  const resource = event.resourceKey as string;
  const reasons: WaitingReason[] = [];
  const [earlier] = await queryRows<{ event_id: string }>(
    manager,
    `SELECT event_id FROM events WHERE resource_key = ? AND status = 'received' AND seq < ? ORDER BY seq LIMIT 1`,
    [resource, event.seq],
  );
  if (earlier) reasons.push({ kind: 'behind_event', event_id: earlier.event_id, resource });
  const runs = await queryRows<{ id: string; type: string; status: string; rule_id: string; event_id: string; next_attempt_at: string }>(
    manager,
    `SELECT a.id, a.type, a.status, a.rule_id, e.event_id, a.next_attempt_at FROM action_runs a JOIN events e ON e.seq = a.event_seq
     WHERE a.resource_key = ? AND a.event_seq < ? AND a.status IN ${UNFINISHED} ORDER BY a.event_seq LIMIT 5`,
    [resource, event.seq],
  );
  if (runs.length > 0) {
    reasons.push({
      kind: 'behind_action_runs',
      resource,
      runs: runs.map((r) => ({ id: r.id, type: r.type, status: r.status, rule: r.rule_id, event_id: r.event_id, next_attempt_at: r.next_attempt_at })),
    });
  }
  return reasons;
}

async function causalBarrier(manager: EntityManager, event: EventEntity): Promise<WaitingReason | undefined> {
  if (event.resourceKey === null) return undefined;
  const [known] = await queryRows(manager, 'SELECT 1 AS known FROM resource_snapshots WHERE resource_key = ?', [event.resourceKey]);
  if (known) return undefined;
  const runs = await queryRows<{ id: string; type: string; rule_id: string; created_at: string }>(
    manager,
    `SELECT id, type, rule_id, created_at FROM action_runs
     WHERE status = 'running' AND type IN (${CREATING_ACTIONS.map(() => '?').join(', ')}) AND created_at <= ?
     ORDER BY created_at LIMIT 5`,
    [...CREATING_ACTIONS, event.receivedAt],
  );
  if (runs.length === 0) return undefined;
  return { kind: 'causal_barrier', runs: runs.map((r) => ({ id: r.id, type: r.type, rule: r.rule_id, created_at: r.created_at })) };
}
