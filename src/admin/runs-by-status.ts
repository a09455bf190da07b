/**
 * SQLite: a page of the action runs of one status, newest first
 * (`GET /admin/actions?status=…`), without reading and sorting every run of
 * that status on the event loop (better-sqlite3 answers synchronously: the
 * engine waits meanwhile).
 *
 * SQLite's one index by status, `idx_action_runs_due (status,
 * next_attempt_at)`, is the claims'. Through it a page reads every run of the
 * status and sorts them: about 490 ms for 200,000 succeeded runs. An index by
 * (status, created_at) would cost every change of a run's status an entry
 * more, on the hot path, and any new index of `action_runs` risks the claims'
 * plans (SQLite plans without statistics; runs-in-flight.ts). So a page takes
 * whichever way reads fewer rows:
 * - a rare status, its runs through `idx_action_runs_due`, sorted;
 * - a common one, every run newest first through `idx_action_runs_created`,
 *   skipping those of other statuses until the page is full.
 * With N runs and a page of P, sorting reads the n runs of the status, walking
 * about P·N/n (when a status is spread over time), so the walk is taken when
 * more than √(P·N) runs have it: either way about √(P·N) rows at most, 3,200
 * for a page of 51 among 200,000. Counting them stops there.
 *
 * A status that is common overall but absent from the newest runs (every run
 * `failed` during an outage) walks further; at worst as far as the sort reads.
 * PostgreSQL sorts on the server, beside the engine's work: this is SQLite's.
 */
import type { EntityManager } from 'typeorm';
import { queryRows } from '../database/sql.js';

/** Keeps the count cheap on a small table, where any way is quick. */
const MIN_THRESHOLD = 1_000;

/** About how many runs there are: the span of their rowids (retention deletes the oldest, so gaps are few). */
const RUN_SPAN = 'SELECT COALESCE((SELECT MAX(rowid) FROM action_runs) - (SELECT MIN(rowid) FROM action_runs) + 1, 0) AS n';
/** How many runs have the status, counted up to a limit (through idx_action_runs_due, its entries alone). */
const COUNT_UP_TO = 'SELECT COUNT(*) AS n FROM (SELECT 1 FROM action_runs WHERE status = ? LIMIT ?)';
/** A page's ids, newest first, walking idx_action_runs_created; `AFTER`: those before a keyset cursor. */
const WALK = 'SELECT id FROM action_runs INDEXED BY idx_action_runs_created WHERE status = ?';
const AFTER = ' AND (created_at, id) < (?, ?)';
const NEWEST_FIRST = ' ORDER BY created_at DESC, id DESC LIMIT ?';

/** The rows beyond which a status is walked rather than sorted, for a page of `take` among about `runs`. */
export function walkThreshold(take: number, runs: number): number {
  return Math.max(MIN_THRESHOLD, Math.ceil(Math.sqrt(take * runs)));
}

/**
 * The ids of the page (`take` runs of `status` created before `after`, newest first, in that order) when the status
 * is common enough to walk; undefined when reading and sorting its runs is the cheaper way (the caller's query).
 */
export async function walkedPageIds(
  manager: EntityManager,
  status: string,
  after: readonly [string, string] | undefined,
  take: number,
): Promise<string[] | undefined> {
  const [{ n: span }] = await queryRows<{ n: number }>(manager, RUN_SPAN);
  const threshold = walkThreshold(take, Number(span));
  const [{ n: counted }] = await queryRows<{ n: number }>(manager, COUNT_UP_TO, [status, threshold + 1]);
  if (Number(counted) <= threshold) return undefined;
  const rows = after
    ? await queryRows<{ id: string }>(manager, WALK + AFTER + NEWEST_FIRST, [status, after[0], after[1], take])
    : await queryRows<{ id: string }>(manager, WALK + NEWEST_FIRST, [status, take]);
  return rows.map((row) => row.id);
}
