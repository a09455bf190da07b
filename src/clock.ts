/** The one place the engine reads the time, so decisions stay pure functions of it. */
export interface Clock {
  now(): Date;
}

export const CLOCK = Symbol('Clock');

export const systemClock: Clock = { now: () => new Date() };

/** The instant `ms` after `at`, as stored (ISO-8601, UTC): when a retry is due. */
export function isoAfter(at: Date, ms: number): string {
  return new Date(at.getTime() + ms).toISOString();
}

/** `ms` from the clock's now, as stored: when a retry is due. */
export function isoIn(clock: Clock, ms: number): string {
  return isoAfter(clock.now(), ms);
}
