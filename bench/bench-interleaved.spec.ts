import { figures, type Timed } from './bench-closed.js';
import type { BenchEngine } from './bench-engine.js';
import type { ArrivalLog } from './bench-fake-service.js';
import { sliceOrder } from './bench-interleaved.js';
import { summarize } from './bench-load.js';
import { parseBenchOptions, type BenchOptions } from './bench-options.js';
import type { ScenarioContext } from './bench-systems.js';
import { slicesLine } from './bench-tables.js';

/**
 * A slice in which `sent` webhooks were sent from `start` (epoch ms), one every `gapMs`, each answered `ackMs`
 * later and its action arriving `actionMs` after sending; `cpu` seconds of the main thread's user time used.
 */
function slice(start: number, sent: number, seconds: number, o: { gapMs: number; ackMs: number; actionMs: number; cpu: number; duplicates?: number }): Timed {
  const sentAt = Float64Array.from({ length: sent }, (_, i) => start + i * o.gapMs);
  const acks = new Float64Array(sent).fill(o.ackMs);
  const arrivals = sentAt.map((t) => t + o.actionMs);
  const log: ArrivalLog = { arrivals, arrived: () => sent, duplicates: () => o.duplicates ?? 0, strays: () => 0, other: () => 0 };
  const windowEnd = start + seconds * 1000;
  return {
    result: { sent, sentAt, statusOf: new Uint16Array(sent).fill(202), statuses: { 202: sent }, seconds, latencyMs: summarize(acks.slice(), sent), ackLatencies: acks, ranOut: false },
    arrivals: log,
    windowStart: start,
    windowEnd,
    cpu: { start: 10, end: 10 + o.cpu, drained: 10 + o.cpu },
    split: { start: { user: 10, system: 0, mainUser: 10, mainSystem: 0 }, drained: { user: 10 + o.cpu, system: 0, mainUser: 10 + o.cpu, mainSystem: 0 } },
    benchCpuSeconds: seconds / 2,
    backlogAtEnd: 0,
    leftAfterDrain: 0,
    drainedAt: windowEnd,
  };
}

const ctx = { options: { connections: 32 } as BenchOptions } as ScenarioContext;
const target: BenchEngine = { url: 'http://127.0.0.1:1', layout: 'child', memory: () => ({ rssMb: 100, peakRssMb: 120 }), cpuSeconds: () => 0, stop: async () => undefined };

describe('closed loops in turns', () => {
  it('visits the systems forwards, then backwards, and so on', () => {
    expect([0, 1, 2, 3].map((k) => sliceOrder(['R', 'S', 'P'], k).join(''))).toEqual(['RSP', 'PSR', 'RSP', 'PSR']);
  });

  it('adds a system\'s slices up: events over the seconds of all of them, latencies over all, CPU an event over all', () => {
    // A fast slice (1,000 events in 1 s, 2 ms actions) and a slow one (500 in 1 s, 8 ms actions, twice the CPU an event).
    const fast = slice(1_000_000, 1_000, 1, { gapMs: 0.9, ackMs: 1, actionMs: 2, cpu: 0.2 });
    const slow = slice(1_010_000, 500, 1, { gapMs: 1.8, ackMs: 3, actionMs: 8, cpu: 0.2, duplicates: 1 });
    const f = figures(ctx, { system: 'sqlite', kind: 'e2e', mode: 'keep-alive' }, target, [fast, slow]);

    expect(f.sent).toBe(1_500);
    expect(f.seconds).toBe(2);
    expect(f.eventsPerSecond).toBe(750);
    expect(f.acknowledgedPerSecond).toBe(750);
    expect(f.e2eLatencyMs!.count).toBe(1_500);
    expect(f.e2eLatencyMs!.p50).toBeCloseTo(2);
    expect(f.e2eLatencyMs!.p90).toBeCloseTo(8);
    expect(f.ackLatencyMs.max).toBe(3);
    expect(f.cpuPerEvent!.mainUserUs).toBeCloseTo((0.4 / 1_500) * 1e6);
    expect(f.cpuSeconds).toBeCloseTo(0.4);
    expect(f.duplicateActions).toBe(1);
    expect(f.benchCpuPercent).toBeCloseTo(50);
    expect(f.slices!.map((s) => s.eventsPerSecond)).toEqual([1_000, 500]);
    expect(f.slices![1]!.windowStart).toBe(1_010_000);
  });

  it('keeps a single run\'s figures as they were, without slices', () => {
    const one = slice(2_000_000, 800, 2, { gapMs: 2, ackMs: 1, actionMs: 3, cpu: 0.1 });
    const f = figures(ctx, { system: 'reference', kind: 'intake', mode: 'keep-alive' }, target, [one]);
    expect(f.eventsPerSecond).toBe(400);
    expect(f.e2eLatencyMs).toBeUndefined();
    expect(f.slices).toBeUndefined();
  });

  it('prints each system\'s figure slice by slice under its table, and nothing for systems measured in one piece', () => {
    const fast = slice(1_000_000, 1_000, 1, { gapMs: 0.9, ackMs: 1, actionMs: 2, cpu: 0.2 });
    const slow = slice(1_010_000, 500, 1, { gapMs: 1.8, ackMs: 3, actionMs: 8, cpu: 0.2 });
    const reference = figures(ctx, { system: 'reference', kind: 'e2e', mode: 'keep-alive' }, target, [slow, fast]);
    const sqlite = figures(ctx, { system: 'sqlite', kind: 'e2e', mode: 'keep-alive' }, target, [fast, slow]);
    const flow = figures(ctx, { system: 'flow', kind: 'e2e', mode: 'keep-alive' }, target, [fast]);

    expect(slicesLine([reference, flow, sqlite])).toEqual([
      '    in turns, 2 slices each (events/s, slice by slice): reference server (SQLite) 500 / 1,000; engine, SQLite 1,000 / 500',
    ]);
    expect(slicesLine([flow])).toEqual([]);
  });

  it('takes --slices (10 in a full run, 2 in a quick one, BENCH_SLICES too) and refuses one that is not a positive number', () => {
    const slices = (argv: string[], env: Record<string, string> = {}) => (parseBenchOptions(argv, env) as BenchOptions).slices;
    expect(slices([])).toBe(10);
    expect(slices(['--quick'])).toBe(2);
    expect(slices(['--slices', '1'])).toBe(1);
    expect(slices([], { BENCH_SLICES: '6' })).toBe(6);
    expect(() => parseBenchOptions(['--slices', '0'], {})).toThrow('slices must be a positive number, got "0"');
    expect(() => parseBenchOptions(['--slices', 'many'], {})).toThrow('slices must be a positive number, got "many"');
  });
});
