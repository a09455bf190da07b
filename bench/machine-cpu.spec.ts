/**
 * The whole machine's busy share: parsed from /proc/stat's text, read from the
 * real file around a child process that spins, and printed in the open loops'
 * tables, with the note that says a system fell behind with every core busy.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpus } from 'node:os';
import type { OpenLoopFigures } from './bench-e2e.js';
import { openLoopLines } from './bench-tables.js';
import { busyPercent, machineTicks, parseProcStat } from './machine-cpu.js';

describe('machine CPU (/proc/stat)', () => {
  it('counts user, nice, system, irq, softirq and steal as busy, idle and iowait as not', () => {
    const text = 'cpu  100 5 40 800 20 3 2 10 7 0\ncpu0 50 2 20 400 10 1 1 5 3 0\nintr 1 2 3\n';
    expect(parseProcStat(text)).toEqual({ busy: 160, total: 980 });
    // Kernels before 2.6.11 give only four fields.
    expect(parseProcStat('cpu 1 2 3 4\n')).toEqual({ busy: 6, total: 10 });
  });

  it('has no figure for text that is not /proc/stat', () => {
    expect(parseProcStat('')).toBeUndefined();
    expect(parseProcStat('cpu0 1 2 3 4 5\n')).toBeUndefined();
    expect(parseProcStat('cpu  1 2 x 4\n')).toBeUndefined();
    expect(busyPercent(undefined, { busy: 1, total: 2 })).toBeUndefined();
    expect(busyPercent({ busy: 1, total: 2 }, { busy: 1, total: 2 })).toBeUndefined();
  });

  it('shares the busy ticks between two readings out over all the time the cores had', () => {
    expect(busyPercent({ busy: 100, total: 1_000 }, { busy: 250, total: 1_200 })).toBeCloseTo(75, 10);
  });

  it('sees a process that keeps a core busy', async () => {
    const start = machineTicks();
    expect(start).toBeDefined();
    const child = spawn(process.execPath, ['-e', 'const end = Date.now() + 600; while (Date.now() < end);'], { stdio: 'ignore' });
    await once(child, 'exit');
    const busy = busyPercent(start, machineTicks());
    // One core of this machine's cores spun the whole time; others may have worked too, never less.
    expect(busy).toBeGreaterThanOrEqual((100 / cpus().length) * 0.6);
    expect(busy).toBeLessThanOrEqual(100);
  }, 20_000);
});

describe('the open loop table', () => {
  const figures = (over: Partial<OpenLoopFigures>): OpenLoopFigures => ({
    system: 'sqlite', layout: 'child', ratePerSecond: 5_000, rateFrom: 'half the reference', sent: 25_000, delivered: 25_000, missing: 0,
    deliveredPerSecond: 4_990, latencyMs: { count: 25_000, mean: 9, p50: 8, p90: 20, p99: 40, p999: 60, max: 70 },
    ackLatencyMs: { count: 25_000, mean: 3, p50: 2, p90: 5, p99: 12, p999: 20, max: 30 }, maxSendLagMs: 3, duplicateActions: 0,
    cpuPercent: 96, benchCpuPercent: 71, machineBusyPercent: 88, memory: { rssMb: 170, peakRssMb: 180 },
    ...over,
  });

  it('prints the load generator\'s CPU and how busy the machine was', () => {
    const lines = openLoopLines([figures({})], 10);
    expect(lines[1]).toMatch(/CPU\s+peak RSS\s+bench CPU\s+machine busy$/);
    expect(lines[2]).toMatch(/96 %\s+180 MB\s+71 %\s+88 %$/);
    expect(lines).toHaveLength(3);
  });

  it('says a system fell behind with every core busy only when the machine was', () => {
    const short = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: 97 })], 10);
    expect(short[3]).toContain('fell behind the offered rate (latency measures a growing queue) on a machine with every core busy;');
    const spare = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: 60 })], 10);
    expect(spare[3]).toContain('fell behind the offered rate (latency measures a growing queue);');
    expect(spare[3]).not.toContain('every core busy');
    const unknown = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: undefined })], 10);
    expect(unknown[2]).toMatch(/–$/);
    expect(unknown[3]).not.toContain('every core busy');
  });
});
