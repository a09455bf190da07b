/**
 * How far the event loop may run ahead of the action loop (workers.ts).
 *
 * Both loops share one process's CPU and its database. With a backlog of
 * events, the event loop could evaluate them faster than their actions are
 * performed: the same CPU spent sooner, and every action later. With 200,000
 * events waiting on PostgreSQL, it evaluated 12,500 of them while the first
 * 5,000 actions were performed, and those came at 0.7x the rate of an empty
 * queue's. So while RUNS_AHEAD_MAX action runs are due and wait for a worker
 * although the action loop had room for them, the event loop claims no new
 * events (they stay stored as received) until the runs ahead are started.
 *
 * It applies only when the actions wait for this process's CPU: not when
 * every slot is busy (a slow service: evaluating events then takes nothing
 * from the actions, and a slow service never holds back the evaluation of
 * events), nor when the rate budget left the action loop no room. Events that
 * intake's commits hand over (at most HANDED_MAX at a time) are evaluated
 * regardless.
 */

/**
 * Due action runs waiting for a worker beyond which the event loop claims no new events: two action claims' worth
 * (the action loop takes 32 at a time). Counting them reads as many index entries each time the event loop looks
 * (at most every 20 ms while it waits): at 256, PostgreSQL's rows read per event end to end rose by about 30.
 */
export const RUNS_AHEAD_MAX = 64;

/** What the action loop's last claim asked for (its free room) and took. */
export interface ActionClaimSeen {
  asked: number;
  took: number;
}

/**
 * Whether the action loop is short of CPU rather than of the service or of the rate budget: its last claim had room,
 * took all it asked for (more are due), and slots are still free. Only then are the due runs counted.
 */
export function actionsShortOfCpu(last: ActionClaimSeen | undefined, busySlots: number, maxInFlight: number): boolean {
  return last !== undefined && last.asked > 0 && last.took >= last.asked && busySlots < maxInFlight;
}
