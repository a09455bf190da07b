/** The one place the engine reads the time, so decisions stay pure functions of it. */
export interface Clock {
  now(): Date;
}

export const CLOCK = Symbol('Clock');

export const systemClock: Clock = { now: () => new Date() };

export function isoIn(clock: Clock, ms: number): string {
  return new Date(clock.now().getTime() + ms).toISOString();
}
