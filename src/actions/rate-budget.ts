/**
 * The per-minute budget shared by every call to the service (SPEC 6, "Rate limit").
 *
 * A sliding log, not a fixed-minute counter: a counter reset on the minute lets
 * a full budget through at 0:59 and another at 1:00. The log keeps the start
 * times of the last `limit` calls in a ring buffer; a new call may start once
 * the oldest of them is a full window old, so no window of `windowMs` ever
 * holds more than `limit` starts, and each check is O(1).
 *
 * A pause (the service said `X-RateLimit-Remaining: 0`) holds every call until
 * its end, whatever the log says: the service's count is the one that matters.
 *
 * This is the budget of one process (SQLite, where one engine owns the file).
 * Replicas on PostgreSQL share one through the database instead
 * (shared-rate-budget.ts); both answer to `Budget`.
 */

export interface RateBudgetOptions {
  limitPerMinute: number;
  /** Milliseconds, monotonic enough: only differences are used. */
  clock: () => number;
  /** The window length; one minute unless a test says otherwise. */
  windowMs?: number;
}

export type Sleep = (ms: number) => Promise<void>;

/** How many calls could start now (up to what was asked), and, when none, in how many ms one may. */
export interface BudgetRoom {
  free: number;
  waitMs: number;
}

/** What the engine asks of a rate budget, whether one process keeps it or the replicas share it. */
export interface Budget {
  readonly limit: number;
  /** Takes a slot without waiting: 0 when taken, else ms until one may be free (nothing taken). */
  take(): Promise<number>;
  /** How many calls could start now, up to `wanted`, without taking any: what to claim. */
  room(wanted: number): BudgetRoom;
  /** Waits for a slot, at most `maxWaitMs`: rejects with BudgetWaitTooLong, having taken nothing, when it would be longer. */
  acquire(sleep?: Sleep, maxWaitMs?: number): Promise<void>;
  /** The service's budget is used up: hold every call for `ms`. */
  pauseFor(ms?: number): void;
  /** Calls that could start right now (for metrics); 0 while paused. */
  remaining(): number;
  /** Clock time the current pause ends, or undefined when not paused. */
  pausedUntil(): number | undefined;
}

/** A wait for a slot would be longer than the caller can afford. */
export class BudgetWaitTooLong extends Error {
  constructor(readonly waitMs: number) {
    super(`the rate budget has no slot free for ${waitMs} ms (used up, or the service asked to pause)`);
  }
}

export const DEFAULT_PAUSE_MS = 60_000;

const timerSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class RateBudget implements Budget {
  readonly limit: number;
  readonly windowMs: number;
  private readonly clock: () => number;
  private readonly starts: Float64Array;
  /** Index of the oldest recorded start once the ring is full; the next write slot before. */
  private next = 0;
  private recorded = 0;
  private pausedUntilMs = Number.NEGATIVE_INFINITY;
  /** Callers queue behind this, so slots go out in arrival order. */
  private queue: Promise<void> = Promise.resolve();

  constructor(options: RateBudgetOptions) {
    const { limitPerMinute, clock, windowMs = 60_000 } = options;
    if (!Number.isInteger(limitPerMinute) || limitPerMinute < 1) {
      throw new RangeError(`limitPerMinute must be a positive integer, got ${limitPerMinute}`);
    }
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be positive, got ${windowMs}`);
    this.limit = limitPerMinute;
    this.windowMs = windowMs;
    this.clock = clock;
    this.starts = new Float64Array(limitPerMinute);
  }

  /**
   * Takes a slot if one is free now and returns 0; otherwise records nothing
   * and returns how many ms to wait before asking again. It does not queue:
   * a caller using it directly goes ahead of those waiting in `acquire`.
   */
  tryAcquire(): number {
    const now = this.clock();
    const wait = this.waitAt(now);
    if (wait > 0) return wait;
    this.record(now);
    return 0;
  }

  take(): Promise<number> {
    return Promise.resolve(this.tryAcquire());
  }

  room(wanted: number): BudgetRoom {
    if (wanted <= 0) return { free: 0, waitMs: 0 };
    const wait = this.waitAt(this.clock());
    return wait > 0 ? { free: 0, waitMs: wait } : { free: Math.min(wanted, this.remaining()), waitMs: 0 };
  }

  /**
   * Waits, in arrival order with the other callers of `acquire`, until a slot
   * is taken; gives up (BudgetWaitTooLong) as soon as the wait is known to end
   * later than `maxWaitMs` after the call. `sleep` is injectable so tests can
   * drive a fake clock.
   */
  acquire(sleep: Sleep = timerSleep, maxWaitMs = Number.POSITIVE_INFINITY): Promise<void> {
    const deadline = this.clock() + maxWaitMs;
    const turn = this.queue.then(() => this.waitForSlot(sleep, deadline));
    // A failed sleep rejects only its own caller, never the ones queued behind it.
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Holds every call until `untilMs` (clock time). A shorter pause never cuts a longer one. */
  pauseUntil(untilMs: number): void {
    if (untilMs > this.pausedUntilMs) this.pausedUntilMs = untilMs;
  }

  /** The service's budget is used up: hold calls for `retryAfterMs`, or a minute without it. */
  pauseFor(retryAfterMs: number | undefined = DEFAULT_PAUSE_MS): void {
    this.pauseUntil(this.clock() + retryAfterMs);
  }

  /** Calls that could start right now (for metrics); 0 while paused. */
  remaining(): number {
    const now = this.clock();
    if (now < this.pausedUntilMs) return 0;
    // Starts are recorded in order, oldest first from `first`: those still in the window are the newest, found by
    // halving (a walk over every start cost a scan of up to `limit` of them at each batch of actions).
    const first = this.recorded < this.limit ? 0 : this.next;
    let low = 0;
    let high = this.recorded;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (now - this.starts[(first + mid) % this.limit]! < this.windowMs) high = mid;
      else low = mid + 1;
    }
    return this.limit - (this.recorded - low);
  }

  /** Clock time the current pause ends, or undefined when not paused. */
  pausedUntil(): number | undefined {
    return this.clock() < this.pausedUntilMs ? this.pausedUntilMs : undefined;
  }

  /**
   * Ms until a call may start: the later of the pause's end and the oldest
   * start leaving the window, so a caller that sleeps exactly this long finds a slot.
   */
  private waitAt(now: number): number {
    const freeAt = this.recorded < this.limit ? now : this.starts[this.next]! + this.windowMs;
    const goAt = Math.max(freeAt, this.pausedUntilMs);
    return now < goAt ? Math.ceil(goAt - now) : 0;
  }

  private record(now: number): void {
    this.starts[this.next] = now;
    this.next = (this.next + 1) % this.limit;
    if (this.recorded < this.limit) this.recorded += 1;
  }

  private async waitForSlot(sleep: Sleep, deadline: number): Promise<void> {
    for (let wait = this.tryAcquire(); wait > 0; wait = this.tryAcquire()) {
      if (this.clock() + wait > deadline) throw new BudgetWaitTooLong(wait);
      await sleep(wait);
    }
  }
}
