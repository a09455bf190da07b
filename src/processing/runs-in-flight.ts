/**
 * Action runs in flight (and failed ones), in the words of the partial indexes
 * that hold just them (migrations 1765600000000, 1765700000000 and
 * 1765800000000): the status as `(status || '')`, the same value, so that
 * those indexes serve the conditions and no index of runs by status can. Not
 * sql.ts's `unindexed` (COALESCE): the claims check a run's status again in
 * those words, and that check must imply neither predicate, or the planner
 * reads a whole partial index for it. Table alias `a`.
 */
import type { DatabaseKind } from '../database/data-source.js';

const STATUS = `(a.status || '')`;

/** Creating runs in flight (idx_action_runs_creating_in_flight: scope kind, created_at): what the causal barrier waits for. */
export const CREATING_IN_FLIGHT = `${STATUS} = 'running' AND a.scope_kind IS NOT NULL`;

/**
 * When the oldest creating run in flight was created (null: none). SQLite is told the index: it keeps no statistics,
 * and given idx_action_runs_created (created_at, id; migration 1766300000000) it took the first run in created_at
 * order that is a create in flight for the cheaper plan, a walk of every run from the oldest (+19 % instructions an
 * event end to end).
 */
export function oldestCreatingInFlight(kind: DatabaseKind): string {
  const index = kind === 'sqlite' ? ' INDEXED BY idx_action_runs_creating_in_flight' : '';
  return `(SELECT MIN(a.created_at) FROM action_runs a${index} WHERE ${CREATING_IN_FLIGHT})`;
}

/**
 * Unfinished runs (idx_action_runs_unfinished: resource key, event seq): what per-resource ordering waits for. Three
 * comparisons, not `IN` with a list of three: SQLite builds a temporary table for such a list, and did so for every
 * run written, where it tested the index's predicate (migration 1765800000000).
 */
export const UNFINISHED_RUN = `(${STATUS} = 'pending' OR ${STATUS} = 'running' OR ${STATUS} = 'retrying')`;

/** Failed runs (idx_action_runs_failed: execution id): what the end of an execution counts. */
export const FAILED_RUN = `${STATUS} = 'failed'`;
