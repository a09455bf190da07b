/**
 * PostgreSQL: planner settings for the rest of one transaction (`set_config(…, true)`), for statements that find
 * their rows by key and run thousands of times a second.
 *
 * A generic plan, made once per session and kept until the statistics of its tables change, instead of the custom
 * plan the engine's sessions make for every execution (`plan_cache_mode=force_custom_plan`, data-source.ts). Found by
 * key only (neither bitmap nor sequential scans), so that a plan made while a table was a few pages cannot read it
 * whole, for every row it checks, for as long as it is kept; and an ordered index scan also marks the entries of rows
 * gone, so the next one skips them, which a bitmap never does (young-statistics.spec.ts).
 *
 * Planning was the largest cost of some of these statements on the server (`pg_stat_statements`, one end to end run
 * of 20,000 events): the action claim 0.28 ms of 0.8, intake's lease of fresh events (part of its INSERT since
 * session 17) 0.37 ms of each intake commit's 0.58, the outcome commit's first two statements 0.3 ms a commit
 * (outcome-batch.ts), intake's INSERT 0.08 ms.
 *
 * The event claim only after a claim that found nothing (work-queue.ts), though its planning took 1.6 ms of its
 * 3.5 ms (365 ms in all, the most of any statement): planned once every time, it drained a backlog of 200,000
 * waiting events 12 % slower (0.77–0.84× the rate of an empty queue instead of 0.91–0.92×, three alternating pairs),
 * so a claim after one that found events is planned for its own barrier and limit.
 */
import type { Statements } from './statements.js';

const forThisTransaction = (settings: Record<string, string>) =>
  `SELECT ${Object.entries(settings).map(([name, value]) => `set_config('${name}', '${value}', true)`).join(', ')}`;

export const PLANNED_ONCE_BY_KEY = forThisTransaction({ plan_cache_mode: 'force_generic_plan', enable_bitmapscan: 'off', enable_seqscan: 'off' });
/** Back to the sessions' own settings (data-source.ts) for the rest of the transaction. */
const PLANNED_EACH_TIME = forThisTransaction({ plan_cache_mode: 'force_custom_plan', enable_bitmapscan: 'on', enable_seqscan: 'on' });

/**
 * Planned at every execution, for its values, but found by key only: what an outcome commit runs after its
 * executions' end (outcome-batch.ts), as it ran when that statement was planned so, on tables the statistics may still
 * count in thousands, where a sequential scan looks cheaper than a few dozen probes.
 */
export const PLANNED_EACH_TIME_BY_KEY = forThisTransaction({ plan_cache_mode: 'force_custom_plan', enable_bitmapscan: 'off', enable_seqscan: 'off' });

/**
 * Sets PLANNED_ONCE_BY_KEY for the rest of the transaction: sent in the same write as what follows and not waited
 * for (if it fails, so does the commit: Statements.queue).
 */
export function planOnceByKey(sql: Statements): void {
  sql.queue(PLANNED_ONCE_BY_KEY).catch(() => undefined);
}

/** Sets PLANNED_EACH_TIME for the rest of the transaction, as planOnceByKey sets its settings. */
export function planEachTime(sql: Statements): void {
  sql.queue(PLANNED_EACH_TIME).catch(() => undefined);
}

/** Sets PLANNED_EACH_TIME_BY_KEY for the rest of the transaction, as planOnceByKey sets its settings. */
export function planEachTimeByKey(sql: Statements): void {
  sql.queue(PLANNED_EACH_TIME_BY_KEY).catch(() => undefined);
}

/** Runs `text`, the last statement of its transaction, with PLANNED_ONCE_BY_KEY. */
export function plannedOnce<T>(sql: Statements, text: string, params: readonly unknown[]): Promise<T[]> {
  planOnceByKey(sql);
  return sql.rows<T>(text, params);
}
