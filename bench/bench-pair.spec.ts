/**
 * bench/bench-pair.ts: the ratios it prints from two engines' figures, and its
 * options. Two real engines run by it: test/bench-pair.e2e-spec.ts.
 */
import { pairOptions, pairSummary, roundLine, summaryLine, type SideFigures } from './bench-pair.js';

const side = (eventsPerSecond: number, mainCpuUs: number): SideFigures => ({ eventsPerSecond, mainCpuUs, mainBusy: 0.5, handled: 1000 });

describe('bench:pair', () => {
  it("sums up B's figures over A's, round by round, as a median and a range", () => {
    const rounds = [
      { a: side(1000, 200), b: side(1100, 180) },
      { a: side(1000, 200), b: side(900, 220) },
      { a: side(2000, 100), b: side(2000, 100) },
    ];
    const s = pairSummary(rounds);
    expect(s.eventsPerSecond).toEqual({ median: 1, min: 0.9, max: 1.1 });
    expect(s.mainCpu.median).toBeCloseTo(1, 9);
    expect(s.mainCpu.min).toBeCloseTo(0.9, 9);
    expect(s.mainCpu.max).toBeCloseTo(1.1, 9);
    // An even number of rounds: the middle two, averaged.
    expect(pairSummary(rounds.slice(0, 2)).eventsPerSecond.median).toBeCloseTo(1, 9);
    expect(pairSummary([{ a: side(1000, 200), b: side(1200, 150) }, { a: side(1000, 200), b: side(1100, 190) }]).mainCpu.median).toBeCloseTo(0.85, 9);
    expect(() => pairSummary([])).toThrow('no round');
  });

  it('prints each engine\'s webhook-to-action p50 and p99 end to end, and sums up B\'s p50 over A\'s', () => {
    const withLatency = (f: SideFigures, p50: number, p99: number): SideFigures => ({ ...f, latency: { p50, p99 } });
    const round = { a: withLatency(side(2000, 250), 20.4, 41), b: withLatency(side(2000, 250), 6.25, 33) };
    expect(roundLine(1, round)).toBe(
      'round 1: A 2,000 events/s, 250 µs of main thread an event (50 % of a core), p50 / p99 20 / 41 ms | B 2,000 events/s, 250 µs of main thread an event (50 % of a core), p50 / p99 6.3 / 33 ms | B/A 1.000× events/s, 1.000× CPU an event, 0.306× p50',
    );
    const rounds = [round, { a: withLatency(side(2000, 250), 20, 40), b: withLatency(side(2000, 250), 10, 30) }];
    expect(pairSummary(rounds).p50!.max).toBeCloseTo(0.5, 9);
    // p99: 33 / 41 and 30 / 40, their median the mean of the two.
    expect(pairSummary(rounds).p99!.min).toBeCloseTo(0.75, 9);
    expect(pairSummary(rounds).p99!.max).toBeCloseTo(33 / 41, 9);
    expect(summaryLine(rounds)).toMatch(/, webhook-to-action p50 0\.403× \(0\.306–0\.500×\), p99 0\.777× \(0\.750–0\.805×\)$/);
    // Intake has no action to wait for: no latency, and no p50 in the summary.
    expect(pairSummary([{ a: side(1000, 200), b: side(1000, 200) }]).p50).toBeUndefined();
    expect(pairSummary([{ a: side(1000, 200), b: side(1000, 200) }]).p99).toBeUndefined();
  });

  it('prints a round and the summary', () => {
    const round = { a: side(2500.4, 263.2), b: side(2400, 270) };
    expect(roundLine(3, round)).toBe(
      'round 3: A 2,500 events/s, 263 µs of main thread an event (50 % of a core) | B 2,400 events/s, 270 µs of main thread an event (50 % of a core) | B/A 0.960× events/s, 1.026× CPU an event',
    );
    expect(summaryLine([round])).toBe('B against A over 1 round(s), median (range): events/s 0.960× (0.960–0.960×), main-thread CPU an event 1.026× (1.026–1.026×)');
  });

  it('prints on PostgreSQL each engine\'s backends\' CPU an event, and B\'s main thread and backends together over A\'s', () => {
    const withBackends = (f: SideFigures, backendCpuUs: number): SideFigures => ({ ...f, backendCpuUs });
    const round = { a: withBackends(side(2000, 250), 350), b: withBackends(side(2000, 200), 280) };
    expect(roundLine(2, round)).toBe(
      'round 2: A 2,000 events/s, 250 µs of main thread an event (50 % of a core), backends 350 µs an event | B 2,000 events/s, 200 µs of main thread an event (50 % of a core), backends 280 µs an event | B/A 1.000× events/s, 0.800× CPU an event, 0.800× CPU an event with the backends',
    );
    expect(summaryLine([round])).toBe('B against A over 1 round(s), median (range): events/s 1.000× (1.000–1.000×), main-thread CPU an event 0.800× (0.800–0.800×), with the backends 0.800× (0.800–0.800×)');
    // Where a round has no backends' figure (SQLite, or a server whose processes are not visible here), none is summed up.
    expect(pairSummary([round, { a: side(2000, 250), b: side(2000, 250) }]).withBackends).toBeUndefined();
  });

  it('takes its options from the command line, and says which is wrong', () => {
    const defaults = pairOptions([]);
    expect(defaults).toMatchObject({ rounds: 5, seconds: 10, warmUpS: 10, connections: 16, intake: false });
    expect(defaults.a.script).toBe(defaults.b.script);
    expect(defaults.a.nodeArgs).toEqual([]);
    expect(pairOptions(['--a-args=  --max-semi-space-size=64   --use-largepages=on ', '--intake']).a.nodeArgs).toEqual(['--max-semi-space-size=64', '--use-largepages=on']);
    expect(() => pairOptions(['--rounds', '0'])).toThrow('--rounds must be a whole number ≥ 1, not "0"');
    expect(() => pairOptions(['--seconds', '1.5'])).toThrow('--seconds must be a whole number ≥ 1');
    expect(() => pairOptions(['--connections', 'many'])).toThrow('--connections must be a whole number ≥ 1');
    expect(() => pairOptions(['--colour'])).toThrow();
    // An open loop at a rate given, end to end only.
    expect(defaults.openRate).toBeUndefined();
    expect(pairOptions(['--open-rate', '1500']).openRate).toBe(1500);
    expect(() => pairOptions(['--open-rate', '0'])).toThrow('--open-rate must be a whole number ≥ 1, not "0"');
    expect(() => pairOptions(['--open-rate', '800', '--intake'])).toThrow('--open-rate sends matching webhooks end to end: it cannot be given with --intake');
    // The rule creating its follow-ups in another project, end to end only.
    expect({ default: defaults.elsewhere, given: pairOptions(['--elsewhere']).elsewhere }).toEqual({ default: false, given: true });
    expect(() => pairOptions(['--elsewhere', '--intake'])).toThrow('--elsewhere is about the end-to-end run; --intake matches no event');
    // SQLite files unless told; --postgres: the server BENCH_POSTGRES_URL names, else the benchmark's default.
    expect(defaults.postgresUrl).toBeUndefined();
    expect(pairOptions(['--postgres'], {}).postgresUrl).toBe('postgres://postgres@127.0.0.1:5432/test');
    expect(pairOptions(['--postgres'], { BENCH_POSTGRES_URL: 'postgres://u@db.example:6543/x' }).postgresUrl).toBe('postgres://u@db.example:6543/x');
  });
});
