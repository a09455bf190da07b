/**
 * The claim's scan of waiting events about unseen resources past the causal
 * barrier (work-queue.ts has the rest of the claim and the reasons). Walking
 * those events in arrival order and checking each against the creating runs in
 * flight read every event that must wait, on every claim: with a burst of new
 * tasks in one project, the whole backlog, again and again.
 *
 * Here the waiting unseen events are reached through idx_events_waiting_scope
 * (scope kind, parent, received_at, seq): the scopes that have any are visited
 * with one index descent each (a recursive skip scan, at most MAX_SCOPES), and
 * in each scope only the events received before its oldest creating run in
 * flight under a live lease are read, as an index range. That is exactly the
 * condition of causal-scope.ts `inScope`: an event is held back by a creating
 * run of its kind, whose parent is its own or unknown on either side, created
 * no later than the event was received. Events held back are never read.
 *
 * Scopes past the first MAX_SCOPES (in the index's order) are not looked at by
 * this scan; their events are claimed once the barrier passes them, as before
 * scopes existed (at most the slowest create in flight, SERVICE_TIMEOUT_MS).
 *
 * PostgreSQL and SQLite get the same walk in their own words: SQLite has no
 * LATERAL, so a step to the next scope is a scalar subquery for the next
 * event's seq (the next parent of the same kind, else the first of the next
 * kind: one row-value comparison over two expressions is not an index range
 * there), and each scope's events are a correlated `IN (… LIMIT n)`.
 */
import type { DatabaseKind } from '../database/data-source.js';
import { CREATING_IN_FLIGHT, oldestCreatingInFlight } from './runs-in-flight.js';

export const MAX_SCOPES = 100;

const SCOPE = `COALESCE(scope_kind, '')`;
const PARENT = `COALESCE(scope_parent, '')`;
const WAITING_UNSEEN = `status = 'received' AND NOT seen_resource`;

/**
 * The oldest creating run in flight, under a live lease (`?`: now), that could create a resource of scope `s`: the
 * first in created_at order (as a MIN, PostgreSQL's plan read all of the kind's, see work-queue.ts HELD_FROM).
 */
const SCOPE_HELD_FROM = `(SELECT a.created_at FROM action_runs a
  WHERE ${CREATING_IN_FLIGHT} AND a.scope_kind = s.kind
    AND (a.scope_parent IS NULL OR s.parent = '' OR a.scope_parent = s.parent) AND a.lease_until > ?
  ORDER BY a.created_at LIMIT 1)`;

/**
 * Candidate seqs (column `seq`), oldest first, at most `limit` per
 * scope and overall. `barrier`: the seq bound of the claim; `filters`: the
 * claim's other conditions on `e` (due, not leased, per-resource order), with
 * their placeholders; `limit`: the limit, written in (SQLite) or `?`
 * (PostgreSQL, work-queue.ts limitSql). Placeholders in order: now (leases of
 * the runs), those of `filters`, those of the two limits.
 */
export function unseenScopedSql(kind: DatabaseKind, barrier: string, filters: string, limit: string): string {
  return kind === 'postgres' ? unseenScopedPostgres(barrier, filters, limit) : unseenScopedSqlite(barrier, filters, limit);
}

/** The events of scope `s` the claim may take, oldest first (placeholders: now, those of `filters`, those of `limit`). */
function inScope(kind: DatabaseKind, barrier: string, filters: string, limit: string, using: string): string {
  return `SELECT e.seq FROM events e ${using}
      WHERE e.status = 'received' AND NOT e.seen_resource
        AND COALESCE(e.scope_kind, '') = s.kind AND COALESCE(e.scope_parent, '') = s.parent
        AND e.received_at >= ${oldestCreatingInFlight(kind)}
        AND e.received_at < COALESCE(${SCOPE_HELD_FROM}, '9999')
        AND e.seq >= ${barrier} AND ${filters}
      ORDER BY e.received_at, e.seq LIMIT ${limit}`;
}

function unseenScopedSqlite(barrier: string, filters: string, limit: string): string {
  const waiting = `events INDEXED BY idx_events_waiting_scope WHERE ${WAITING_UNSEEN}`;
  return `
    WITH RECURSIVE scopes(kind, parent, n) AS (
      SELECT * FROM (SELECT ${SCOPE}, ${PARENT}, 1 FROM ${waiting} ORDER BY 1, 2 LIMIT 1)
      UNION ALL
      SELECT COALESCE(next.scope_kind, ''), COALESCE(next.scope_parent, ''), s.n + 1 FROM scopes s JOIN events next ON next.seq = COALESCE(
        (SELECT seq FROM ${waiting} AND ${SCOPE} = s.kind AND ${PARENT} > s.parent ORDER BY ${PARENT} LIMIT 1),
        (SELECT seq FROM ${waiting} AND ${SCOPE} > s.kind ORDER BY ${SCOPE}, ${PARENT} LIMIT 1))
      WHERE s.n < ${MAX_SCOPES})
    SELECT w.seq FROM scopes s JOIN events w ON w.seq IN (${inScope('sqlite', barrier, filters, limit, 'INDEXED BY idx_events_waiting_scope')})
    ORDER BY w.seq LIMIT ${limit}`;
}

function unseenScopedPostgres(barrier: string, filters: string, limit: string): string {
  return `
    WITH RECURSIVE scopes(kind, parent, n) AS (
      (SELECT ${SCOPE}, ${PARENT}, 1 FROM events WHERE ${WAITING_UNSEEN} ORDER BY 1, 2 LIMIT 1)
      UNION ALL
      SELECT next.kind, next.parent, s.n + 1 FROM scopes s CROSS JOIN LATERAL (
        SELECT ${SCOPE} AS kind, ${PARENT} AS parent FROM events
        WHERE ${WAITING_UNSEEN} AND (${SCOPE}, ${PARENT}) > (s.kind, s.parent)
        ORDER BY 1, 2 LIMIT 1) next
      WHERE s.n < ${MAX_SCOPES})
    SELECT w.seq FROM scopes s CROSS JOIN LATERAL (${inScope('postgres', barrier, filters, limit, '')}) w
    ORDER BY w.seq LIMIT ${limit}`;
}
