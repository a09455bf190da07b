/**
 * The benchmark's CPU by thread: read from /proc for a real child process that
 * works on its main thread and on a worker thread, and the per-event figures
 * and the line the closed-loop tables print from them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cpuPerEvent, type ClosedLoopFigures } from './bench-closed.js';
import { procCpuSplit } from './bench-engine.js';
import { closedLoopLines } from './bench-tables.js';

/** Work that takes a few hundred ms of CPU on this machine, whatever else runs. */
const SPIN = 'let x = 0; for (let i = 0; i < 3e8; i++) x = (x + i) % 1000003;';

/**
 * A node process that spins on its main thread, then on a worker thread (the main thread waiting for it), then says
 * `done` on stdout and waits to be killed.
 */
function worker(): ChildProcess {
  const script = `
    const { Worker } = require('node:worker_threads');
    ${SPIN}
    const w = new Worker(${JSON.stringify(`${SPIN} require('node:worker_threads').parentPort.postMessage(x);`)}, { eval: true });
    w.on('message', () => { process.stdout.write('done\\n'); setInterval(() => undefined, 1000); });
  `;
  return spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
}

describe('CPU by thread (procCpuSplit)', () => {
  let child: ChildProcess | undefined;

  afterEach(() => {
    child?.kill('SIGKILL');
    child = undefined;
  });

  it("tells the main thread's time from the other threads'", async () => {
    child = worker();
    const before = procCpuSplit(child.pid!);
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    expect(line.toString()).toBe('done\n');
    const after = procCpuSplit(child.pid!);

    const main = after.mainUser - before.mainUser;
    const all = after.user - before.user;
    // Each spin is the same work: the main thread did one, another thread the other.
    expect(main).toBeGreaterThan(0.1);
    expect(all - main).toBeGreaterThan(0.1);
    expect(all - main).toBeGreaterThan(main * 0.5);
    expect(after.mainSystem).toBeLessThanOrEqual(after.system);
  }, 30_000);

  it('is per event, with the main thread busy as a share of a core', () => {
    const start = { user: 10, system: 2, mainUser: 8, mainSystem: 1 };
    const end = { user: 16.1, system: 3.2, mainUser: 13.1, mainSystem: 2 };
    const c = cpuPerEvent(start, end, 12_000, 8);
    expect(c?.mainUserUs).toBeCloseTo(425, 6);
    expect(c?.mainSystemUs).toBeCloseTo(83.333, 2);
    expect(c?.otherThreadsUs).toBeCloseTo(100, 6);
    expect(c?.mainBusy).toBeCloseTo(0.7625, 6);
    expect(cpuPerEvent(start, end, 0, 8)).toBeUndefined();
  });

  it('is printed under its closed loop', () => {
    const figures = {
      system: 'sqlite', kind: 'e2e', connectionMode: 'keep-alive', connections: 32, eventsPerSecond: 1_800, failed: {},
      e2eLatencyMs: { p50: 29, p99: 55 }, ackLatencyMs: { p50: 20, p99: 39, p999: 45 }, acknowledgedPerSecond: 1_800, backlogAtEnd: 0,
      leftAfterDrain: 0, drainSeconds: 0, duplicateActions: 0, eventsPerCpuSecond: 1_900, memory: { rssMb: 170, peakRssMb: 174 }, benchCpuPercent: 47,
      cpuPerEvent: { mainUserUs: 411.4, mainSystemUs: 73.6, mainBusy: 0.871, otherThreadsUs: 29.87 },
    } as unknown as ClosedLoopFigures;
    expect(closedLoopLines([figures], 10)).toContain(
      '    engine, SQLite, CPU per event (drain included): main thread 411 µs user + 73.6 µs system (87 % of a core), other threads 29.9 µs');
  });
});
