/**
 * The one "poll until" of the code base: the demo waits on the engine with it,
 * the simulator on its own deliveries, and the benchmark and the end-to-end
 * tests reuse it (test/support/wait.ts).
 * It lives in src/ because the demo ships in dist/ and cannot import test/.
 * Polling keeps a wait independent of how the awaited part signals progress.
 */

export interface WaitOptions {
  /** Give up after this long; 10 s unless told. */
  timeoutMs?: number;
  /** Pause between probes; 50 ms unless told. */
  intervalMs?: number;
  /** What is awaited, for the error on timeout ("the engine to be ready"). */
  what?: string;
}

type Seen = { error: unknown } | { value: unknown };

function describeSeen(seen: Seen): string {
  if ('error' in seen) return `; last error: ${seen.error instanceof Error ? seen.error.message : String(seen.error)}`;
  let shown: string;
  try {
    shown = JSON.stringify(seen.value) ?? String(seen.value);
  } catch {
    shown = String(seen.value);
  }
  return `; last value: ${shown.length > 200 ? `${shown.slice(0, 200)}…` : shown}`;
}

/**
 * Calls `probe` until it returns a truthy value and resolves with that value.
 * A probe that throws (or rejects) counts as "not yet". After `timeoutMs` it
 * rejects with an Error naming `what` and the last error or value seen (the
 * last error is also its `cause`). The probe runs at least once, whatever the
 * timeout.
 */
export async function waitUntil<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: WaitOptions = {},
): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 50, what = 'a condition' } = options;
  const deadline = Date.now() + timeoutMs;
  let seen: Seen;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
      seen = { value };
    } catch (error) {
      seen = { error };
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      const cause = 'error' in seen ? { cause: seen.error } : undefined;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${describeSeen(seen)}`, cause);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, left)));
  }
}
