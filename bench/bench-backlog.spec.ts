/**
 * The backlog part's timing (bench-backlog.ts `ratesTogether`): two drains that ran at the same time are timed over
 * the moments both were draining, each one's warm-up (its first tenth) left out.
 */
import { ratesTogether } from './bench-backlog.js';

/** Arrival times (epoch ms) from `start`, one every `everyMs`, `n` of them. */
const every = (start: number, everyMs: number, n: number) => Array.from({ length: n }, (_, i) => start + i * everyMs);

describe(ratesTogether.name, () => {
  it('times each drain over the moments both drained, not past the end of the one that finished first', () => {
    // A: one action a millisecond, its 100 done at 1,099. B: one every 2 ms while A runs, then one a millisecond, as
    // it would once the machine is its alone; timed to its own 100th, its rate would be about 800 a second.
    const a = every(1_000, 1, 100);
    const b = [...every(1_010, 2, 45), ...every(1_100, 1, 55)];
    const { windowSeconds, rates } = ratesTogether([
      { arrivals: Float64Array.from(a), count: 100 },
      { arrivals: Float64Array.from(b), count: 100 },
    ]);
    // From the later of the two 10th arrivals (B's, at 1,030) to the earlier of the two 100th (A's, at 1,099).
    expect(windowSeconds).toBeCloseTo(0.069, 6);
    expect(rates[0]).toEqual({ measured: 69, eventsPerSecond: 69 / 0.069 });
    expect(rates[1]!.measured).toBe(34); // 1,032 … 1,098
    expect(rates[1]!.eventsPerSecond).toBeCloseTo(34 / 0.069, 6);
  });

  it('reads arrivals in any order, leaves out the slots nothing arrived in, and times only the first `count`', () => {
    const a = every(1_000, 1, 100);
    const late = every(2_000, 1, 50); // after the first 100: not timed
    const shuffled = Float64Array.from([...late, ...a.slice().reverse(), 0, 0, 0]);
    const { windowSeconds, rates } = ratesTogether([{ arrivals: shuffled, count: 100 }]);
    expect(windowSeconds).toBeCloseTo(0.089, 6); // 1,010 to 1,099
    expect(rates[0]!.measured).toBe(89);
  });

  it('gives no rate when a drain had too few arrivals to time', () => {
    const { windowSeconds, rates } = ratesTogether([
      { arrivals: Float64Array.from(every(1_000, 1, 100)), count: 100 },
      { arrivals: new Float64Array(100), count: 100 },
    ]);
    expect(windowSeconds).toBe(0);
    expect(rates).toEqual([{ measured: 0, eventsPerSecond: 0 }, { measured: 0, eventsPerSecond: 0 }]);
  });
});
