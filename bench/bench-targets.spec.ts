import type { ClosedLoopFigures } from './bench-closed.js';
import { LOAD_GENERATOR_BUSY, ratioAgainst, versus } from './bench-targets.js';

/** A keep-alive intake figure with what `versus` reads; the rest does not matter to it. */
function figures(system: ClosedLoopFigures['system'], eventsPerSecond: number, eventsPerCpuSecond: number, benchCpuPercent: number): ClosedLoopFigures {
  return { system, kind: 'intake', connectionMode: 'keep-alive', eventsPerSecond, eventsPerCpuSecond, benchCpuPercent } as ClosedLoopFigures;
}

describe('versus (a ratio target against another system of the same run)', () => {
  it('judges the events/s alone when the load generator beside the reference had room', () => {
    const check = versus(figures('sqlite', 3_436, 4_729, 64), figures('reference', 4_443, 8_230, 60), 0.7);
    expect(check).toEqual({ figure: '0.77× (3,436 / 4,443 events/s)', met: true });
  });

  it('also asks events per CPU-second when the load generator may have capped the reference', () => {
    // Session 38's intake: 0.77× as printed, the generator at 87 % of a core, 0.57× per CPU-second.
    const check = versus(figures('sqlite', 3_436, 4_729, 64), figures('reference', 4_443, 8_230, 87), 0.7);
    expect(check?.met).toBe(false);
    expect(check?.figure).toBe('0.77× (3,436 / 4,443 events/s); the load generator beside the reference at 87 % of a core, so judged also per CPU-second: 0.57×');
  });

  it('is met with a capped reference when both ratios reach the target', () => {
    const check = versus(figures('sqlite', 4_000, 7_000, 50), figures('reference', 5_000, 8_000, LOAD_GENERATOR_BUSY), 0.7);
    expect(check?.met).toBe(true);
  });

  it('counts the database CPU when it was measured', () => {
    const postgres = { ...figures('postgres', 4_000, 9_000, 40), eventsPerCpuSecondWithDatabase: 4_000 };
    const check = versus(postgres, figures('reference', 5_000, 8_000, 95), 0.7);
    expect(check?.met).toBe(false);
    expect(check?.figure).toContain('per CPU-second: 0.50×');
  });
});

describe('ratioAgainst (a ratio printed beside its target)', () => {
  it('prints a third decimal where two would round it onto the target', () => {
    // Session 47's SQLite end to end: 3,118 / 6,283, not met.
    const check = versus(figures('sqlite', 3_118, 3_422, 49), figures('reference', 6_283, 7_675, 81), 0.5);
    expect(check).toEqual({ figure: '0.496× (3,118 / 6,283 events/s)', met: false });
    expect(ratioAgainst(0.504, 0.5)).toBe('0.504×');
    expect(ratioAgainst(0.5, 0.5)).toBe('0.50×');
    expect(ratioAgainst(0.49, 0.5)).toBe('0.49×');
    expect(ratioAgainst(0.7994, 0.8)).toBe('0.799×');
  });
});
