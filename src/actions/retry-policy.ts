/**
 * What to do after a failed call to the service (SPEC 6, "Retries"). Pure: the
 * clock and the random source are passed in, the runner persists the decision.
 *
 * Backoff uses "equal jitter": half of the exponential delay is fixed and the
 * other half random. Full jitter spreads a herd slightly better, but it can
 * also retry a struggling service almost at once; with equal jitter every
 * retry waits at least half its nominal delay while concurrent runs that
 * failed together still drift apart.
 */

export const BASE_DELAY_MS = 1_000;
export const MAX_BACKOFF_MS = 5 * 60_000;
/** A Retry-After beyond this is treated as this: a bad header must not park a run for days. */
export const MAX_RETRY_AFTER_MS = 60 * 60_000;

export type Failure =
  | { kind: 'network' | 'timeout'; code?: string; message?: string }
  | { kind: 'http'; status: number; retryAfter?: string; code?: string; message?: string };

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: string };

// The three HTTP-date forms of RFC 9110 §5.6.7; Date.parse alone accepts far
// more (it reads "foo 12" as December 2001).
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

function parseHttpDate(value: string): number | undefined {
  let text: string;
  if (IMF_FIXDATE.test(value) || RFC850_DATE.test(value)) text = value;
  else if (ASCTIME_DATE.test(value)) text = `${value} GMT`; // asctime has no zone but means GMT
  else return undefined;
  const time = Date.parse(text);
  return Number.isNaN(time) ? undefined : time;
}

/**
 * A Retry-After header as a wait in milliseconds from `now`: delay-seconds or
 * an HTTP-date. Negative seconds and past dates mean "now" (0); anything
 * unreadable is undefined, so the caller falls back to its own delay.
 */
export function parseRetryAfter(header: string | undefined, now: Date): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^-?\d+(\.\d+)?$/.test(value)) return Math.max(0, Math.round(Number(value) * 1000));
  const time = parseHttpDate(value);
  return time === undefined ? undefined : Math.max(0, time - now.getTime());
}

/** A uniform number in [0, 1) even if the source misbehaves. */
function unitRandom(random: () => number): number {
  const value = random();
  return Number.isFinite(value) ? Math.min(Math.max(value, 0), 1 - Number.EPSILON) : 0;
}

/**
 * Delay before retrying after failed attempt number `attempt` (1-based):
 * about 1 s, doubling each attempt, capped at 5 minutes, with equal jitter
 * (a result in [nominal / 2, nominal]).
 */
export function backoffDelayMs(attempt: number, random: () => number): number {
  const exponent = Math.min(Math.max(Math.floor(attempt) - 1, 0), 30); // 2^30 s is far past the cap
  const nominal = Math.min(MAX_BACKOFF_MS, BASE_DELAY_MS * 2 ** exponent);
  return Math.round(nominal / 2 + unitRandom(random) * (nominal / 2));
}

function isTransientStatus(status: number): boolean {
  return status === 408 || status === 425 || (status >= 500 && status <= 599);
}

function describeFailure(failure: Failure): string {
  const detail = [failure.code, failure.message].filter(Boolean).join(': ');
  const what = failure.kind === 'http' ? `HTTP ${failure.status}` : failure.kind === 'timeout' ? 'timeout' : 'network error';
  return detail ? `${what} (${detail})` : what;
}

function retryDelay(failure: Failure, attempt: number, now: Date, random: () => number): number | undefined {
  if (failure.kind !== 'http') return backoffDelayMs(attempt, random);
  if (failure.status === 429) {
    const wait = parseRetryAfter(failure.retryAfter, now);
    return wait === undefined ? backoffDelayMs(attempt, random) : Math.min(wait, MAX_RETRY_AFTER_MS);
  }
  return isTransientStatus(failure.status) ? backoffDelayMs(attempt, random) : undefined;
}

/**
 * After attempt number `attempt` (1-based) failed: retry, and when, or give up.
 * 429 waits for Retry-After (backoff without one); network errors, timeouts,
 * 408, 425 and 5xx back off; any other status fails at once.
 */
export function decideAfterFailure(
  failure: Failure,
  attempt: number,
  maxAttempts: number,
  now: Date,
  random: () => number,
): RetryDecision {
  const delayMs = retryDelay(failure, attempt, now, random);
  if (delayMs === undefined) return { retry: false, reason: `${describeFailure(failure)} is not retryable` };
  if (attempt >= maxAttempts) {
    return { retry: false, reason: `${describeFailure(failure)} after ${attempt} of ${maxAttempts} attempts` };
  }
  return { retry: true, delayMs };
}
