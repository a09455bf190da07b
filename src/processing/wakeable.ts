/**
 * How the worker loops (workers.ts) wait: a sleep that whoever makes new work
 * can end at once, a backoff while the database refuses writes, and a turn
 * for I/O between batches.
 */

/** Pauses between tries while the database refuses writes. */
const STORAGE_PAUSES_MS = [250, 500, 1_000, 2_000];

export class Backoff {
  private step = 0;

  next(): number {
    return STORAGE_PAUSES_MS[Math.min(this.step++, STORAGE_PAUSES_MS.length - 1)];
  }

  reset(): void {
    this.step = 0;
  }
}

/** A sleep that `nudge` ends at once; a nudge while awake ends the next sleep before it starts. */
export class Wakeable {
  private wake: (() => void) | undefined;
  private pending = false;

  nudge(): void {
    this.pending = true;
    this.wake?.();
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}

/**
 * Lets requests in between batches. On SQLite every statement completes at
 * once, so a loop with work waiting would otherwise run from one resolved
 * promise to the next and never give intake, /health or the admin API a turn
 * (a backlog of 200,000 events kept /health/ready unanswered for half a minute).
 */
export function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
