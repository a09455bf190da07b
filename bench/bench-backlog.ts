/**
 * Does claiming work cost more when much work is waiting? Two runs per
 * database, one after the other on the same fresh database:
 *
 *   empty queue  `--backlog-measured` matching events (20,000) waiting;
 *   backlog      then `--backlog` more (200,000) waiting, behind the history
 *                the first run left;
 *
 * The events are stored straight into the `events` table as the intake would
 * have stored them (bench-databases.ts), with the engine stopped: the engine's
 * migrations first create the schema (run by the benchmark's own connection);
 * then, for each run, the events are inserted and the engine started. The drain
 * rate is the rate at which the first `--backlog-measured` actions of the run
 * reach the fake service, from the first arrival to the last of them; the
 * figure is the ratio backlog / empty queue (1.0: claiming does not depend on
 * what waits behind).
 */
import { openDatabase } from '../test/support/storage.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import type { EngineMemory } from './bench-engine.js';
import { runPrefix, waitingEvents } from './bench-events.js';
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
}

/** How long the engine may take to answer /health/ready with the backlog waiting. */
const READY_LIMIT_S = 120;

/**
 * Rate from the (count/10)-th arrival to the count-th (in arrival order): the
 * first tenth, while the fresh process warms up its JIT and connections, is
 * left out of both runs alike.
 */
function drainRate(arrivals: Float64Array, count: number): { measured: number; eventsPerSecond: number } {
  const times = arrivals.filter((t) => t !== 0).sort();
  const measured = Math.min(count, times.length);
  const from = Math.floor(measured / 10);
  if (measured - from < 2) return { measured, eventsPerSecond: 0 };
  return { measured, eventsPerSecond: (measured - 1 - from) / ((times[measured - 1] - times[from]) / 1000) };
}

async function drainOnce(ctx: ScenarioContext, db: BenchDatabase, waiting: number): Promise<DrainFigures> {
  const measuredCount = ctx.options.backlogMeasured;
  const prefix = runPrefix(`backlog_${db.name}`);
  ctx.progress(`backlog (${db.name}): ${waiting.toLocaleString('en-US')} events waiting, timing the first ${measuredCount.toLocaleString('en-US')} …`);
  await db.insertWaitingEvents(waitingEvents('matching', prefix, waiting));
  const arrivals = await ctx.fake.beginRun(prefix, waiting);
  const spawned = epochNow();
  const engine = await startSystem(ctx, db.name, db, `backlog-${waiting}`, READY_LIMIT_S * 1000).catch((error: Error) => error);
  const readySeconds = (epochNow() - spawned) / 1000;
  if (engine instanceof Error) {
    // A figure, not a failure of the benchmark: the first line says what happened.
    const failed = `not ready within ${READY_LIMIT_S} s (${engine.message.split('\n')[0]})`;
    return { waiting, failed, measured: 0, eventsPerSecond: 0, readySeconds, memory: { rssMb: 0 } };
  }
  try {
    await drain(() => measuredCount - arrivals.arrived(), ctx.options.drainLimitS * 2 * 1000, 50);
    return { waiting, ...drainRate(arrivals.arrivals, measuredCount), readySeconds, memory: engine.memory() };
  } finally {
    await engine.stop();
  }
}

export function runBacklog(ctx: ScenarioContext, system: DatabaseName): Promise<BacklogFigures> {
  return ctx.withDatabase(system, async (db) => {
    // The engine's migrations make the schema, run here rather than by an engine started and stopped for them.
    await (await openDatabase(db.url)).dataSource.destroy();
    const emptyQueue = await drainOnce(ctx, db, ctx.options.backlogMeasured);
    const backlog = await drainOnce(ctx, db, ctx.options.backlog);
    const ratio = emptyQueue.eventsPerSecond > 0 ? backlog.eventsPerSecond / emptyQueue.eventsPerSecond : 0;
    return { system, emptyQueue, backlog, ratio };
  });
}
