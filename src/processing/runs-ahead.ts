/**
 * How far the event loop may run ahead of the action loop (workers.ts).
 *
 * Both loops share one process's CPU and its database. With a backlog of
 * events, the event loop could evaluate them faster than their actions are
 * performed: the same CPU spent sooner, and every action later. With 200,000
 * events waiting on PostgreSQL, it evaluated 12,500 of them while the first
 * 5,000 actions were performed, and those came at 0.7x the rate of an empty
 * queue's. So while RUNS_AHEAD_MAX action runs it created wait for a worker
 * and the action loop takes all it has room for, the event loop claims no new
 * events (they stay stored as received) until the runs ahead are started.
 *
 * It applies only when the actions wait for this process's CPU: not when
 * every slot is busy (a slow service: evaluating events then takes nothing
 * from the actions, and a slow service never holds back the evaluation of
 * events), nor when the rate budget left the action loop no room. Events that
 * intake's commits hand over (at most HANDED_MAX at a time) are evaluated
 * regardless.
 */

/** Action runs waiting for a worker beyond which the event loop claims no new events: two action claims' worth. */
export const RUNS_AHEAD_MAX = 64;

/** What the action loop's last claim asked for (its free room) and took. */
export interface ActionClaimSeen {
  asked: number;
  took: number;
}

/**
 * Whether the action loop is short of CPU rather than of the service or of the rate budget: its last claim had room,
 * took all it asked for (more are due), and slots are still free.
 */
export function actionsShortOfCpu(last: ActionClaimSeen | undefined, busySlots: number, maxInFlight: number): boolean {
  return last !== undefined && last.asked > 0 && last.took >= last.asked && busySlots < maxInFlight;
}

/**
 * This process's count of the action runs it created and left in the database for want of room in its action loop,
 * less those its action claims took since. No query: a claim that takes fewer runs than it asked for has found every
 * due one, and sets the count to nothing. It can only err low (runs created by other commits or replicas, retries
 * coming due are not added), and a count left high by runs another replica took is cleared by this process's next
 * claim, which then finds fewer than it asked for. (A count of due runs in the database, walked through
 * idx_action_runs_due each time the event loop looked, took PostgreSQL's rows read per event end to end from 80–84 to
 * 71–172.)
 */
export class RunsAhead {
  private waiting = 0;
  private last: ActionClaimSeen | undefined;

  /** A commit of evaluated events created `count` runs it did not hand to the action loop. */
  created(count: number): void {
    this.waiting += count;
  }

  /** The action loop's claim asked for `asked` runs and took `took` (`undefined`: it failed). */
  claimed(seen: ActionClaimSeen | undefined): void {
    this.last = seen;
    if (seen === undefined) return;
    this.waiting = seen.took < seen.asked ? 0 : Math.max(0, this.waiting - seen.took);
  }

  /** Whether the event loop should claim no new events now. */
  ahead(busySlots: number, maxInFlight: number): boolean {
    return this.waiting >= RUNS_AHEAD_MAX && actionsShortOfCpu(this.last, busySlots, maxInFlight);
  }
}
