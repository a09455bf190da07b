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
    const lines = openLoopLines([figures({})], 10, 5);
    expect(lines[1]).toMatch(/CPU\s+peak RSS\s+bench CPU\s+machine busy$/);
    expect(lines[2]).toMatch(/96 %\s+180 MB\s+71 %\s+88 %$/);
    expect(lines).toHaveLength(3);
  });

  it('says a system fell behind with every core busy only when the machine was', () => {
    const short = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: 97 })], 10, 5);
    expect(short[3]).toContain('fell behind the offered rate (latency measures a growing queue) on a machine with every core busy;');
    const spare = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: 60 })], 10, 5);
    expect(spare[3]).toContain('fell behind the offered rate (latency measures a growing queue);');
    expect(spare[3]).not.toContain('every core busy');
    const unknown = openLoopLines([figures({ deliveredPerSecond: 3_000, machineBusyPercent: undefined })], 10, 5);
    expect(unknown[2]).toMatch(/–$/);
    expect(unknown[3]).not.toContain('every core busy');
  });

  it('prints the half rate sent for longer as a table of its own, its title saying for how long', () => {
    const lines = openLoopLines([
      figures({ system: 'reference', seconds: 5 }), figures({ seconds: 5 }),
      figures({ rateFrom: 'a quarter of the reference', ratePerSecond: 2_500, seconds: 5 }),
      figures({ seconds: 20, deliveredPerSecond: 4_000, latencyMs: { count: 100_000, mean: 900, p50: 800, p90: 2_000, p99: 2_400, p999: 2_500, max: 2_600 } }),
    ], 10, 5);
    const titles = lines.filter((line) => line.startsWith('open loop'));
    expect(titles).toHaveLength(3);
    expect(titles[0]).toContain("at half the reference's closed-loop rate, 5,000 events/s, keep-alive");
    expect(titles[0]).not.toContain('sent for');
    expect(titles[2]).toContain("at half the reference's closed-loop rate, 5,000 events/s, sent for 20 s instead of 5, keep-alive");
    const sustained = lines.slice(lines.indexOf(titles[2]));
    expect(sustained.filter((line) => /^ {2}\S/.test(line))).toEqual([expect.stringMatching(/^ {2}engine, SQLite\s+4,000\s.*2,400 ms/)]);
    expect(sustained.at(-1)).toContain('fell behind the offered rate');
  });

  it('reads results written before the figures named their duration as sent for the run\'s', () => {
    const lines = openLoopLines([figures({ system: 'reference' }), figures({ seconds: 5 })], 10, 5);
    expect(lines.filter((line) => line.startsWith('open loop'))).toHaveLength(1);
  });
});
