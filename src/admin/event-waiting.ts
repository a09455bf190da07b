/**
 * Why an event is still `received`, in the terms of the work queue's claim
 * (processing/work-queue.ts): it is being evaluated now; its evaluation was
 * postponed (a lookup failed) until a time; an earlier event about the same
 * resource waits before it; action runs of an earlier event on that resource
 * have not finished; an action that creates resources is in flight and the
 * event's resource is new to the engine and could have been created by one of
 * them (the causal barrier, scoped: causal-scope.ts); or none of these,
 * and the workers have simply not taken it yet.
 */
import type { EntityManager } from 'typeorm';
import type { EventEntity } from '../database/event.entity.js';
import { kindOf, queryRows, waitingEvent } from '../database/sql.js';
import { CREATING_IN_FLIGHT, UNFINISHED_RUN } from '../processing/runs-in-flight.js';

export type WaitingReason =
  | { kind: 'evaluating'; lease_until: string }
  | { kind: 'postponed'; until: string; attempts: number; error: string | null }
  | { kind: 'behind_event'; event_id: string; resource: string }
  | { kind: 'behind_action_runs'; resource: string; runs: Array<{ id: string; type: string; status: string; rule: string; event_id: string; next_attempt_at: string }> }
  | {
      kind: 'causal_barrier';
      /** What could have caused the event (causal-scope.ts). */
      scope: { kind: string; parent: string | null };
      why: string;
      runs: Array<{ id: string; type: string; rule: string; created_at: string; lease_until: string; event_id: string | null; creates_in: { kind: string; parent: string | null } }>;
    }
  | { kind: 'queued' };

export async function whyWaiting(manager: EntityManager, event: EventEntity, now: Date): Promise<WaitingReason[]> {
  if (event.status !== 'received') return [];
  const at = now.toISOString();
  const reasons: WaitingReason[] = [];
  if (event.leaseUntil !== null && event.leaseUntil > at) reasons.push({ kind: 'evaluating', lease_until: event.leaseUntil });
  if (event.nextAttemptAt > at) reasons.push({ kind: 'postponed', until: event.nextAttemptAt, attempts: event.attempts, error: event.error });
  if (event.resourceKey !== null) reasons.push(...(await behindResource(manager, event)));
  const barrier = await causalBarrier(manager, event, at);
  if (barrier) reasons.push(barrier);
  return reasons.length > 0 ? reasons : [{ kind: 'queued' }];
}

async function behindResource(manager: EntityManager, event: EventEntity): Promise<WaitingReason[]> {
  const resource = event.resourceKey as string;
  const reasons: WaitingReason[] = [];
  const [earlier] = await queryRows<{ event_id: string }>(
    manager,
    `SELECT event_id FROM events WHERE resource_key = ? AND ${waitingEvent(kindOf(manager.connection))} AND seq < ? ORDER BY seq LIMIT 1`,
    [resource, event.seq],
  );
  if (earlier) reasons.push({ kind: 'behind_event', event_id: earlier.event_id, resource });
  const runs = await queryRows<{ id: string; type: string; status: string; rule_id: string; event_id: string; next_attempt_at: string }>(
    manager,
    `SELECT a.id, a.type, a.status, a.rule_id, e.event_id, a.next_attempt_at FROM action_runs a JOIN events e ON e.seq = a.event_seq
     WHERE a.resource_key = ? AND a.event_seq < ? AND ${UNFINISHED_RUN} ORDER BY a.event_seq LIMIT 5`,
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

/**
 * The creating runs in flight, in the event's scope (causal-scope.ts), that
 * the claim waits for: the same condition as work-queue.ts's OUTSIDE_EVERY_SCOPE.
 */
async function causalBarrier(manager: EntityManager, event: EventEntity, at: string): Promise<WaitingReason | undefined> {
  if (event.resourceKey === null || event.seenResource || event.scopeKind === null) return undefined;
  const runs = await queryRows<{ id: string; type: string; rule_id: string; created_at: string; lease_until: string; scope_kind: string; scope_parent: string | null; event_id: string | null }>(
    manager,
    `SELECT a.id, a.type, a.rule_id, a.created_at, a.lease_until, a.scope_kind, a.scope_parent, e.event_id
     FROM action_runs a LEFT JOIN events e ON e.seq = a.event_seq
     WHERE ${CREATING_IN_FLIGHT} AND a.scope_kind = ? AND ${event.scopeParent === null ? '' : '(a.scope_parent IS NULL OR a.scope_parent = ?) AND'}
       a.lease_until > ? AND a.created_at <= ?
     ORDER BY a.created_at LIMIT 5`,
    [event.scopeKind, ...(event.scopeParent === null ? [] : [event.scopeParent]), at, event.receivedAt],
  );
  if (runs.length === 0) return undefined;
  const scope = { kind: event.scopeKind, parent: event.scopeParent };
  return {
    kind: 'causal_barrier',
    scope,
    why: `the engine has not seen ${event.resourceKey}, and these runs, in flight, may have created it: the service can send its webhook before its answer, which loop protection needs; the event waits for their answers (at most until their lease ends)`,
    runs: runs.map((r) => ({
      id: r.id, type: r.type, rule: r.rule_id, created_at: r.created_at, lease_until: r.lease_until, event_id: r.event_id,
      creates_in: { kind: r.scope_kind, parent: r.scope_parent },
    })),
  };
}
