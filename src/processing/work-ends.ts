/**
 * What a piece of work that ended leaves for the loops (workers.ts): whether a
 * claim could find something it unblocked, so that a loop is woken only when it can.
 */
import { isStep } from '../rules/rule.types.js';
import type { ClaimedActionRun, ClaimedEvent, CreatedRun, LoadedExecution } from './work.js';

/**
 * Whether every committed event about a resource left a run on it: the next
 * event about that resource then waits for the run to end (which nudges the
 * event loop), so nothing the commit unblocked is claimable yet.
 */
export function allHoldTheirResource(committed: Array<Pick<ClaimedEvent, 'resource_key' | 'seq'>>, created: CreatedRun[]): boolean {
  const held = new Set<number>();
  for (const { run } of created) if (run.resource_key !== null) held.add(run.event_seq);
  return committed.every((claim) => claim.resource_key === null || held.has(claim.seq));
}

/** A plain action that was its execution's last entry, and ended: its outcome's commit queued no further run. */
export function endsItsExecution(claim: ClaimedActionRun, execution: LoadedExecution | undefined, status: string | undefined): boolean {
  if (execution === undefined || (status !== 'succeeded' && status !== 'failed' && status !== 'skipped')) return false;
  const entry = execution.rule.actions[claim.position];
  return entry !== undefined && claim.position === execution.rule.actions.length - 1 && claim.item_index == null && !isStep(entry.type) && entry.forEach === undefined;
}
