import * as fc from 'fast-check';
import { BudgetWaitTooLong, RateBudget } from './rate-budget.js';

const MINUTE = 60_000;

function makeBudget(limitPerMinute = 3, start = 0) {
  const clock = { now: start };
  const budget = new RateBudget({ limitPerMinute, clock: () => clock.now });
  // A fake sleep that moves the fake clock, so acquire() runs without timers.
  const sleeps: number[] = [];
  const sleep = async (ms: number) => {
    sleeps.push(ms);
    clock.now += ms;
  };
  return { budget, clock, sleep, sleeps };
}

/** No window [t, t + 60 s) holds more than `limit` of the sorted start times. */
function maxInAnyWindow(starts: number[]): number {
  let most = 0;
  for (let first = 0, last = 0; last < starts.length; last += 1) {
    while (starts[last]! - starts[first]! >= MINUTE) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

describe(RateBudget.name, () => {
  describe('a burst', () => {
    it('lets exactly the limit through, then says how long to wait', () => {
      const { budget, clock } = makeBudget(3, 1_000);
      expect([budget.tryAcquire(), budget.tryAcquire(), budget.tryAcquire()]).toEqual([0, 0, 0]);
      expect(budget.tryAcquire()).toBe(MINUTE);
      clock.now += 59_999;
      expect(budget.tryAcquire()).toBe(1);
      clock.now += 1;
      expect(budget.tryAcquire()).toBe(0);
      expect(budget.tryAcquire()).toBe(0);
      expect(budget.tryAcquire()).toBe(0);
      expect(budget.tryAcquire()).toBe(MINUTE);
    });

    it('records nothing when it refuses', () => {
      const { budget, clock } = makeBudget(1);
      budget.tryAcquire();
      for (let i = 0; i < 10; i += 1) budget.tryAcquire();
      clock.now = MINUTE;
      expect(budget.tryAcquire()).toBe(0);
    });
  });

  describe('the sliding window', () => {
    it('allows a call at 60 s after calls at 0..59 s', () => {
      const { budget, clock } = makeBudget(60);
      for (let second = 0; second < 60; second += 1) {
        clock.now = second * 1_000;
        expect(budget.tryAcquire()).toBe(0);
      }
      clock.now = 59_999;
      expect(budget.tryAcquire()).toBe(1);
      clock.now = MINUTE;
      expect(budget.tryAcquire()).toBe(0);
      expect(budget.tryAcquire()).toBe(1_000);
    });

    it('does not reset on the minute like a fixed counter would', () => {
      const { budget, clock } = makeBudget(2);
      clock.now = 59_000;
      budget.tryAcquire();
      budget.tryAcquire();
      clock.now = 61_000;
      expect(budget.tryAcquire()).toBe(58_000);
    });
  });

  describe('a pause', () => {
    it('holds calls until it ends, even with slots free', () => {
      const { budget, clock } = makeBudget(10);
      budget.pauseUntil(5_000);
      expect(budget.tryAcquire()).toBe(5_000);
      expect(budget.remaining()).toBe(0);
      expect(budget.pausedUntil()).toBe(5_000);
      clock.now = 5_000;
      expect(budget.tryAcquire()).toBe(0);
      expect(budget.pausedUntil()).toBeUndefined();
    });

    it('keeps the longer of two pauses', () => {
      const { budget } = makeBudget();
      budget.pauseUntil(30_000);
      budget.pauseUntil(10_000);
      expect(budget.tryAcquire()).toBe(30_000);
    });

    it.each([
      ['Retry-After', 12_000, 12_000],
      ['a minute without it', undefined, MINUTE],
    ])('pauseFor waits for %s', (_name, retryAfter, expected) => {
      const { budget, clock } = makeBudget();
      clock.now = 1_000;
      budget.pauseFor(retryAfter);
      expect(budget.tryAcquire()).toBe(expected);
    });

    it('is honoured by callers already waiting', async () => {
      const { budget, clock, sleep } = makeBudget(1);
      budget.tryAcquire();
      const waiting = budget.acquire(async (ms) => {
        await sleep(ms);
        if (clock.now === MINUTE) budget.pauseUntil(90_000);
      });
      await waiting;
      expect(clock.now).toBe(90_000);
    });
  });

  describe('remaining', () => {
    it('counts the free slots in the current window', () => {
      const { budget, clock } = makeBudget(3);
      expect(budget.remaining()).toBe(3);
      budget.tryAcquire();
      clock.now = 30_000;
      budget.tryAcquire();
      expect(budget.remaining()).toBe(1);
      clock.now = MINUTE;
      expect(budget.remaining()).toBe(2);
    });

    it('counts as a walk over every start would, the ring full or not, at any moment', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 7 }), fc.array(fc.tuple(fc.integer({ min: 0, max: 40_000 }), fc.boolean()), { maxLength: 60 }), (limit, steps) => {
          const { budget, clock } = makeBudget(limit);
          const taken: number[] = [];
          for (const [advance, take] of steps) {
            clock.now += advance;
            if (take && budget.tryAcquire() === 0) taken.push(clock.now);
            const inWindow = taken.slice(-limit).filter((at) => clock.now - at < MINUTE).length;
            expect(budget.remaining()).toBe(limit - inWindow);
          }
        }),
      );
    });
  });

  describe('acquire', () => {
    it('waits until a slot frees, serving callers in arrival order', async () => {
      const { budget, clock, sleep } = makeBudget(2);
      const order: Array<[string, number]> = [];
      const calls = ['a', 'b', 'c', 'd', 'e'].map((name) =>
        budget.acquire(sleep).then(() => order.push([name, clock.now])),
      );
      await Promise.all(calls);
      expect(order).toEqual([
        ['a', 0],
        ['b', 0],
        ['c', MINUTE],
        ['d', MINUTE],
        ['e', 2 * MINUTE],
      ]);
    });

    it('uses real timers by default', async () => {
      const budget = new RateBudget({ limitPerMinute: 1, clock: Date.now, windowMs: 20 });
      const started = Date.now();
      await budget.acquire();
      await budget.acquire();
      expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    });

    it('lets the queue move on when one caller sleep fails', async () => {
      const { budget, sleep } = makeBudget(1);
      budget.tryAcquire();
      const failing = budget.acquire(() => Promise.reject(new Error('shutting down')));
      const next = budget.acquire(sleep);
      await expect(failing).rejects.toThrow('shutting down');
      await expect(next).resolves.toBeUndefined();
    });
  });

  describe('room, what the workers may claim', () => {
    it('says how many calls could start, without taking any', () => {
      const { budget } = makeBudget(3);
      budget.tryAcquire();
      expect(budget.room(10)).toEqual({ free: 2, waitMs: 0 });
      expect(budget.room(1)).toEqual({ free: 1, waitMs: 0 });
      expect(budget.room(0)).toEqual({ free: 0, waitMs: 0 });
      expect(budget.remaining()).toBe(2);
    });

    it('says when a slot frees once the budget is used up, and while paused', async () => {
      const { budget, clock } = makeBudget(2);
      expect([await budget.take(), await budget.take(), await budget.take()]).toEqual([0, 0, MINUTE]);
      clock.now = 45_000;
      expect(budget.room(5)).toEqual({ free: 0, waitMs: 15_000 });
      clock.now = MINUTE;
      budget.pauseFor(5_000);
      expect(budget.room(5)).toEqual({ free: 0, waitMs: 5_000 });
    });
  });

  describe('acquire with a longest wait', () => {
    it('gives up at once, taking nothing, when the slot is further away', async () => {
      const { budget, clock, sleep, sleeps } = makeBudget(1);
      budget.tryAcquire();
      clock.now = 50_000;
      await expect(budget.acquire(sleep, 9_999)).rejects.toThrow(BudgetWaitTooLong);
      expect(sleeps).toEqual([]);
      await expect(budget.acquire(sleep, 10_000)).resolves.toBeUndefined();
      expect(sleeps).toEqual([10_000]);
    });

    it('counts the time spent queued behind other callers', async () => {
      const { budget, sleep } = makeBudget(1);
      const first = budget.acquire(sleep);
      const second = budget.acquire(sleep); // a minute behind the first
      const third = budget.acquire(sleep, 90_000); // two minutes behind
      await expect(Promise.all([first, second])).resolves.toBeDefined();
      await expect(third).rejects.toThrow('no slot free for 60000 ms');
    });
  });

  it('rejects a limit that is not a positive integer', () => {
    for (const limitPerMinute of [0, -1, 1.5, Number.NaN]) {
      expect(() => new RateBudget({ limitPerMinute, clock: () => 0 })).toThrow(RangeError);
    }
  });

  describe('properties', () => {
    const step = fc.record({
      advanceMs: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 70_000 })),
      pauseMs: fc.option(fc.integer({ min: 0, max: 90_000 }), { freq: 10 }),
    });

    it('never lets a 60 s window hold more than the limit, and its waits are exact', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 20 }), fc.array(step, { maxLength: 300 }), (limit, steps) => {
          const { budget, clock } = makeBudget(limit);
          const started: number[] = [];
          for (const { advanceMs, pauseMs } of steps) {
            clock.now += advanceMs;
            if (pauseMs !== null) budget.pauseUntil(clock.now + pauseMs);
            const wait = budget.tryAcquire();
            if (wait === 0) {
              started.push(clock.now);
              continue;
            }
            // Waiting exactly the answer must be enough (nothing else happened meanwhile).
            clock.now += wait;
            if (budget.tryAcquire() !== 0) return false;
            started.push(clock.now);
          }
          return maxInAnyWindow(started) <= limit;
        }),
        { numRuns: 2_000 },
      );
    });
  });
});
