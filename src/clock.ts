/** The one place the engine reads the time, so decisions stay pure functions of it. */
export interface Clock {
  now(): Date;
}

export const CLOCK = Symbol('Clock');

export const systemClock: Clock = { now: () => new Date() };

const MINUTE_MS = 60_000;
/** The farthest instant from 1970 a Date holds, either way (ECMAScript's time values). */
const MAX_TIME_MS = 8.64e15;
/** The two minutes `isoString` formatted last, and the text of each up to its seconds (`2026-11-29T07:41:`). */
const minutes = [Number.NaN, Number.NaN];
const prefixes = ['', ''];
/** Which of the two was formatted longer ago: the next new minute takes its place. */
let older = 0;

/**
 * `new Date(ms).toISOString()`, the same text, made faster. The hot path writes
 * several timestamps per event (received, processed, leased until, an attempt's
 * start), and V8's `toISOString` formats each through `snprintf` seven times:
 * about 7,000 instructions, some 2 % of an event's work end to end. The
 * instants come mostly from one minute, or two (now, and a lease's end), so
 * V8 formats the date, hour and minute of each once and only the seconds and
 * milliseconds are written here. A fraction of a millisecond is dropped, as
 * Date drops it; an instant `toISOString` refuses (not finite, or beyond its
 * range) is refused the same way.
 */
export function isoString(ms: number): string {
  const at = Math.trunc(ms);
  if (!(Math.abs(at) <= MAX_TIME_MS)) return new Date(at).toISOString(); // throws RangeError, as toISOString does
  const minute = Math.floor(at / MINUTE_MS);
  let slot = minute === minutes[0] ? 0 : minute === minutes[1] ? 1 : -1;
  if (slot < 0) {
    const iso = new Date(at).toISOString();
    slot = older;
    older = 1 - older;
    minutes[slot] = minute;
    prefixes[slot] = iso.slice(0, -7); // without `SS.mmmZ`; years beyond 9999 are longer
  }
  const inMinute = at - minute * MINUTE_MS;
  const seconds = Math.floor(inMinute / 1000);
  const millis = inMinute - seconds * 1000;
  return `${prefixes[slot]}${seconds < 10 ? '0' : ''}${seconds}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}

/** `at.toISOString()`, as stored (ISO-8601, UTC), made faster: see `isoString`. */
export function isoOf(at: Date): string {
  return isoString(at.getTime());
}

/** The clock's now, as stored. */
export function nowIso(clock: Clock): string {
  return isoOf(clock.now());
}

/** The instant `ms` after `at`, as stored (ISO-8601, UTC): when a retry is due. */
export function isoAfter(at: Date, ms: number): string {
  return isoString(at.getTime() + ms);
}

/** `ms` from the clock's now, as stored: when a retry is due. */
export function isoIn(clock: Clock, ms: number): string {
  return isoAfter(clock.now(), ms);
}
