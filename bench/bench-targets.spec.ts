import type { ClosedLoopFigures } from './bench-closed.js';
import type { OpenLoopFigures } from './bench-e2e.js';
import type { BenchResults } from './bench-results.js';
import { judgeTargets, LOAD_GENERATOR_BUSY, ratioAgainst, versus } from './bench-targets.js';

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

describe('the open loop\'s targets', () => {
  const open = (over: Partial<OpenLoopFigures>) => ({
    system: 'sqlite', rateFrom: 'half the reference', ratePerSecond: 2_000, deliveredPerSecond: 1_995, missing: 0, seconds: 5,
    latencyMs: { p99: 30 }, memory: { rssMb: 150, peakRssMb: 170 }, ...over,
  }) as OpenLoopFigures;
  const judged = (openLoop: OpenLoopFigures[]) => {
    const results = { closedLoop: [], openLoop, backlog: [], startup: [], waiting: [], options: { openDurationS: 5 } } as unknown as BenchResults;
    const row = (start: string) => judgeTargets(results).find((t) => t.target.startsWith(start))!;
    return {
      half: row('SQLite e2e p99 < 50 ms at half the reference rate (open loop)'),
      quarter: row('SQLite e2e p99 < 50 ms at half of 0.5'),
      sustained: row('SQLite e2e p99 < 50 ms at half the reference rate, sent for 20 s'),
      rss: row('engine peak RSS'),
    };
  };

  it('judges the half rate over the run\'s 5 s and, apart, over 20 s, whatever order they ran in', () => {
    const { half, sustained, quarter } = judged([
      open({ seconds: 20, deliveredPerSecond: 1_600, latencyMs: { p99: 8_400 } as OpenLoopFigures['latencyMs'] }),
      open({ system: 'reference', latencyMs: { p99: 12 } as OpenLoopFigures['latencyMs'] }),
      open({}),
      open({ rateFrom: 'a quarter of the reference', ratePerSecond: 1_000, latencyMs: { p99: 9 } as OpenLoopFigures['latencyMs'] }),
    ]);
    expect(half).toMatchObject({ verdict: 'met', figure: 'p99 30 ms at 2,000 events/s; reference p99 12 ms' });
    expect(quarter).toMatchObject({ verdict: 'met', figure: 'p99 9.0 ms at 1,000 events/s' });
    expect(sustained).toMatchObject({
      verdict: 'not met', figure: 'p99 8,400 ms at 2,000 events/s, behind (1,600 delivered a second); reference p99 12 ms over 5 s',
    });
  });

  it('is met over 20 s as over 5: p99 under 50 ms, every action arrived', () => {
    expect(judged([open({}), open({ seconds: 20, latencyMs: { p99: 45 } as OpenLoopFigures['latencyMs'] })]).sustained.verdict).toBe('met');
    expect(judged([open({}), open({ seconds: 20, latencyMs: { p99: 45 } as OpenLoopFigures['latencyMs'], missing: 3 })]).sustained.verdict).toBe('not met');
  });

  it('says "not measured" for the 20 s when the run had none (a quick run), and reads older results as the run\'s 5 s', () => {
    const { half, sustained } = judged([open({ seconds: undefined })]);
    expect(half.verdict).toBe('met');
    expect(sustained).toMatchObject({ verdict: 'not measured', figure: '–' });
  });

  it('names the 20 s run where it set the peak RSS', () => {
    const { rss } = judged([open({}), open({ seconds: 20, memory: { rssMb: 190, peakRssMb: 204 } })]);
    expect(rss).toMatchObject({ verdict: 'not met', figure: 'highest 204 MB (open loop sqlite 20 s), over 2 engine runs' });
  });
});
