/**
 * Does claiming work cost more when much work is waiting? Two engines per
 * database, each on a fresh database of its own, drained at the same time:
 *
 *   empty queue  `--backlog-measured` matching events (20,000) waiting;
 *   backlog      `--backlog` matching events (200,000) waiting.
 *
 * The events are stored straight into the `events` table as the intake would
 * have stored them (bench-databases.ts), with the engines stopped: the engine's
 * migrations first create the schema (run by the benchmark's own connection);
 * then both databases get their events, and both engines are started, each
 * with a fake service of its own. Each one's drain rate is that of its actions
 * reaching its fake service over the moments both were draining
 * (`ratesTogether`); the figure is the ratio backlog / empty queue (1.0:
 * claiming does not depend on what waits behind). Until session 49 the two
 * ran one after the other, and the ratio of two runs a minute apart swung with
 * the machine (bench/README.md, Backlog): draining together, both share
 * whatever the machine does in each moment.
 */
import { openDatabase } from '../test/support/storage.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import type { BenchEngine, EngineMemory } from './bench-engine.js';
import { runPrefix, waitingEvents } from './bench-events.js';
import { startFakeService, type ArrivalLog, type FakeService } from './bench-fake-service.js';
import { drain, epochNow, startSystem, type ScenarioContext } from './bench-systems.js';

export interface DrainFigures {
  waiting: number;
  /** Why nothing was timed: the engine did not become ready within the limit. */
  failed?: string;
  /** Actions timed (fewer than asked when the limit came first). */
  measured: number;
  eventsPerSecond: number;
  /** From spawning the engine to /health/ready with that many events waiting. */
  readySeconds: number;
  memory: EngineMemory;
}

export interface BacklogFigures {
  system: DatabaseName;
  emptyQueue: DrainFigures;
  backlog: DrainFigures;
  /** backlog rate / empty-queue rate. */
  ratio: number;
  /** How long both were timed: the moments both drained (ratesTogether). */
  windowSeconds?: number;
}

/** How long the engine may take to answer /health/ready with the backlog waiting. */
const READY_LIMIT_S = 120;

/** One drain's arrival times and how many of them to time. */
export interface TimedDrain {
  arrivals: Float64Array;
  count: number;
}

/**
 * The rates of drains that ran at the same time, over the moments all of them were draining: from the latest of
 * their (count/10)-th arrivals (the first tenth, while each fresh process warms up its JIT and connections, is left
 * out) to the earliest of their count-th. A drain that finishes first leaves the machine to the others; timed past
 * that moment, they would gain from it. `measured`: the arrivals in that window.
 */
export function ratesTogether(drains: readonly TimedDrain[]): { windowSeconds: number; rates: Array<{ measured: number; eventsPerSecond: number }> } {
  const sorted = drains.map(({ arrivals, count }) => {
    const times = arrivals.filter((t) => t !== 0).sort();
    return times.subarray(0, Math.min(count, times.length));
  });
  const from = Math.max(...sorted.map((times) => times[Math.floor(times.length / 10)] ?? Infinity));
  const to = Math.min(...sorted.map((times) => times[times.length - 1] ?? -Infinity));
  const windowSeconds = (to - from) / 1000;
  if (!(windowSeconds > 0)) return { windowSeconds: 0, rates: sorted.map(() => ({ measured: 0, eventsPerSecond: 0 })) };
  return {
    windowSeconds,
    rates: sorted.map((times) => {
      const measured = times.filter((t) => t > from && t <= to).length;
      return { measured, eventsPerSecond: measured / windowSeconds };
    }),
  };
}

interface Drain {
  db: BenchDatabase;
  waiting: number;
  fake: FakeService;
}

interface Started {
  engine: BenchEngine | Error;
  readySeconds: number;
  arrivals: ArrivalLog;
}

/** Stores a drain's events, the engine stopped; its fake service's log of their actions' arrivals. */
async function store(ctx: ScenarioContext, { db, waiting, fake }: Drain): Promise<ArrivalLog> {
  const prefix = runPrefix(`backlog_${db.name}`);
  ctx.progress(`backlog (${db.name}): storing ${waiting.toLocaleString('en-US')} waiting events …`);
  await db.insertWaitingEvents(waitingEvents('matching', prefix, waiting));
  return fake.beginRun(prefix, waiting);
}

/** Spawns a drain's engine: the engine, or why it did not become ready, and how long it took. */
async function spawn(ctx: ScenarioContext, { db, waiting, fake }: Drain, arrivals: ArrivalLog): Promise<Started> {
  const spawned = epochNow();
  const engine = await startSystem({ ...ctx, fake }, db.name, db, `backlog-${waiting}`, READY_LIMIT_S * 1000).catch((error: Error) => error);
  return { engine, readySeconds: (epochNow() - spawned) / 1000, arrivals };
}

/** The drains' engines started together and timed over the same moments (ratesTogether); each stopped after. */
async function drainTogether(ctx: ScenarioContext, drains: Drain[]): Promise<{ figures: DrainFigures[]; windowSeconds: number }> {
  const count = ctx.options.backlogMeasured;
  const logs: ArrivalLog[] = [];
  for (const d of drains) logs.push(await store(ctx, d));
  ctx.progress(`backlog (${drains[0]!.db.name}): ${drains.map((d) => d.waiting.toLocaleString('en-US')).join(' and ')} waiting, timing the first ${count.toLocaleString('en-US')} of each at the same time …`);
  const started = await Promise.all(drains.map((d, i) => spawn(ctx, d, logs[i]!)));
  try {
    const failedAt = started.findIndex((s) => s.engine instanceof Error);
    if (failedAt >= 0) {
      // A figure, not a failure of the benchmark: the first line says what happened.
      const failed = `not ready within ${READY_LIMIT_S} s (${(started[failedAt]!.engine as Error).message.split('\n')[0]})`;
      const figures = drains.map((d, i) => ({ waiting: d.waiting, failed: i === failedAt ? failed : undefined, measured: 0, eventsPerSecond: 0, readySeconds: started[i]!.readySeconds, memory: { rssMb: 0 } }));
      return { figures, windowSeconds: 0 };
    }
    // Two engines share the machine: each drains at about half the rate it would alone.
    await drain(() => Math.max(...started.map((s) => count - s.arrivals.arrived())), ctx.options.drainLimitS * 6 * 1000, 50);
    const { windowSeconds, rates } = ratesTogether(started.map((s) => ({ arrivals: s.arrivals.arrivals, count })));
    const figures = drains.map((d, i) => ({ waiting: d.waiting, ...rates[i]!, readySeconds: started[i]!.readySeconds, memory: (started[i]!.engine as BenchEngine).memory() }));
    return { figures, windowSeconds };
  } finally {
    await Promise.all(started.map((s) => (s.engine instanceof Error ? undefined : s.engine.stop())));
  }
}

export function runBacklog(ctx: ScenarioContext, system: DatabaseName): Promise<BacklogFigures> {
  return ctx.withDatabase(system, (emptyDb) => ctx.withDatabase(system, async (backlogDb) => {
    // The engine's migrations make the schemas, run here rather than by an engine started and stopped for them.
    for (const db of [emptyDb, backlogDb]) await (await openDatabase(db.url)).dataSource.destroy();
    const fake = await startFakeService(ctx.cleanup);
    try {
      const { figures: [emptyQueue, backlog], windowSeconds } = await drainTogether(ctx, [
        { db: emptyDb, waiting: ctx.options.backlogMeasured, fake: ctx.fake },
        { db: backlogDb, waiting: ctx.options.backlog, fake },
      ]);
      const ratio = emptyQueue!.eventsPerSecond > 0 ? backlog!.eventsPerSecond / emptyQueue!.eventsPerSecond : 0;
      return { system, emptyQueue: emptyQueue!, backlog: backlog!, ratio, windowSeconds };
    } finally {
      await fake.close();
    }
  }));
}
