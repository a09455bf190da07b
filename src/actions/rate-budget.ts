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
 */

export interface RateBudgetOptions {
  limitPerMinute: number;
  /** Milliseconds, monotonic enough: only differences are used. */
  clock: () => number;
  /** The window length; one minute unless a test says otherwise. */
  windowMs?: number;
}

export type Sleep = (ms: number) => Promise<void>;

export const DEFAULT_PAUSE_MS = 60_000;

const timerSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class RateBudget {
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
    // The later of the pause's end and the oldest start leaving the window,
    // so a caller that sleeps exactly this long finds a slot.
    const freeAt = this.recorded < this.limit ? now : this.starts[this.next]! + this.windowMs;
    const goAt = Math.max(freeAt, this.pausedUntilMs);
    if (now < goAt) return Math.ceil(goAt - now);
    this.record(now);
    return 0;
  }

  /**
   * Waits, in arrival order with the other callers of `acquire`, until a slot
   * is taken. `sleep` is injectable so tests can drive a fake clock.
   */
  acquire(sleep: Sleep = timerSleep): Promise<void> {
    const turn = this.queue.then(() => this.waitForSlot(sleep));
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
    let inWindow = 0;
    for (let i = 0; i < this.recorded; i += 1) {
      if (now - this.starts[i]! < this.windowMs) inWindow += 1;
    }
    return this.limit - inWindow;
  }

  /** Clock time the current pause ends, or undefined when not paused. */
  pausedUntil(): number | undefined {
    return this.clock() < this.pausedUntilMs ? this.pausedUntilMs : undefined;
  }

  private record(now: number): void {
    this.starts[this.next] = now;
    this.next = (this.next + 1) % this.limit;
    if (this.recorded < this.limit) this.recorded += 1;
  }

  private async waitForSlot(sleep: Sleep): Promise<void> {
    for (let wait = this.tryAcquire(); wait > 0; wait = this.tryAcquire()) {
      await sleep(wait);
    }
  }
}
