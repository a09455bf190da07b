/**
 * Waiting is not holding (issue 13). An action run claimed when the rate
 * budget has no slot free (used up, or the service asked to pause) is not kept
 * waiting under its lease: a lease can run out while it waits, and then
 * another worker would send the same request too. It is handed back to the
 * database instead, due when a slot frees: claimable again as a waiting run
 * (pending, or retrying after an earlier attempt), with no lease, and with the
 * claim's attempt undone (nothing was sent, so nothing was attempted). Like
 * every change to a claimed run, only while this worker still holds it.
 *
 * The workers claim no more runs than the budget can start (workers.ts), so a
 * hand-back is the exception: a budget that another replica used up meanwhile,
 * or a pause that began after the claim.
 */
import { type Clock, isoIn, nowIso } from '../clock.js';
import { Database } from '../database/database.service.js';
import { statementsOf } from '../database/statements.js';
import type { ClaimedActionRun } from './work.js';

const HAND_BACK = `
  UPDATE action_runs
  SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'pending' END, attempts = attempts - 1,
      lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, updated_at = ?
  WHERE id = ? AND lease_owner = ? AND status = 'running'`;

/** Hands `claim` back, due in `waitMs`; false when the lease was lost (someone else owns the run now). */
export async function handBackForBudget(db: Database, clock: Clock, claim: ClaimedActionRun, owner: string, waitMs: number): Promise<boolean> {
  const now = nowIso(clock);
  const changed = await db.write((manager) => statementsOf(manager).run(HAND_BACK, [isoIn(clock, waitMs), now, claim.id, owner]));
  return changed > 0;
}
