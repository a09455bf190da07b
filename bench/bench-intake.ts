/**
 * Webhook intake: how many signed events per second the engine acknowledges,
 * and how long each acknowledgement takes, with `connections` clients each
 * sending its next event as soon as the last one is answered.
 *
 * The events are `task.updated` about distinct tasks: the benchmark rule
 * listens to them and evaluates its condition, which fails, so the engine's
 * background processing (claim, evaluate, record the explanation) competes
 * with intake as it would in production, without service calls in the way.
 */
import { join } from 'node:path';
import type { Cleanup } from './bench-cleanup.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import { BENCH_SECRET, startEngine, type BenchEngine, type EngineMemory } from './bench-engine.js';
import { closedLoop, prepareEvents, WebhookPoster, type ClosedLoopResult, type LatencySummary, type PreparedEvent } from './bench-load.js';
import type { BenchOptions, Layout } from './bench-options.js';

export interface ScenarioContext {
  options: BenchOptions;
  cleanup: Cleanup;
  serviceUrl: string;
  /** A progress line (stderr: the figures go to stdout). */
  progress(line: string): void;
  /** Where engine CPU profiles go (one subfolder per run), when profiling was asked for. */
  profileDir?: string;
}

export interface IntakeFigures {
  database: DatabaseName;
  layout: Layout;
  connections: number;
  seconds: number;
  sent: number;
  acknowledged: number;
  duplicates: number;
  /** Answers other than 202/200, and requests that got no answer (status 0). */
  failed: Record<string, number>;
  eventsPerSecond: number;
  latencyMs: LatencySummary;
  /** The prepared events ran out before the duration did: raise BENCH_EVENTS. */
  ranOut: boolean;
  engineMemory: EngineMemory;
  /** Events the engine finished processing (any final status) while the run lasted. */
  processedDuringRun: number;
  processedPerSecond: number;
  /** Accepted but still waiting to be processed when the run ended. */
  backlogAtEnd: number;
  /**
   * Share of one core used during the timed run by the engine and by this
   * process (load generator, simulator); on 2 cores, 200 % is the ceiling for
   * both together. In process, the engine's figure is the whole process's.
   */
  cpuPercent: { engine: number; benchProcess: number };
}

export function profileDirFor(ctx: ScenarioContext, part: string, database: DatabaseName): string | undefined {
  return ctx.profileDir === undefined ? undefined : join(ctx.profileDir, `${part}-${database}`);
}

function intakeEvent(tag: string) {
  return (i: number) => ({
    id: `evt_${tag}_${i}`,
    type: 'task.updated',
    created_at: new Date().toISOString(),
    data: { task: { id: `tsk_${tag}_${i}`, project_id: 'prj_1', title: 'Routine update', status: 'open', assignee_id: 'usr_1' } },
  });
}

function finished(counts: Record<string, number>): number {
  return Object.entries(counts).reduce((sum, [status, n]) => (status === 'received' ? sum : sum + n), 0);
}

function failures(statuses: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(statuses).filter(([status]) => status !== '202' && status !== '200'));
}

interface TimedRun {
  result: ClosedLoopResult;
  cpuPercent: IntakeFigures['cpuPercent'];
  /** Events finished before the run, and status counts right after it. */
  finishedBefore: number;
  countsAfter: Record<string, number>;
}

/** The timed closed-loop run, with the engine's and this process's CPU and the database's counts around it. */
async function timedRun(ctx: ScenarioContext, engine: BenchEngine, database: BenchDatabase, poster: WebhookPoster, events: PreparedEvent[]): Promise<TimedRun> {
  const { options } = ctx;
  const finishedBefore = finished(await database.eventStatusCounts());
  ctx.progress(`intake (${database.name}): ${options.connections} connections for up to ${options.durationS} s …`);
  const cpuBefore = { engine: engine.cpuSeconds(), bench: process.cpuUsage() };
  const result = await closedLoop(poster, events, options.connections, options.durationS * 1000);
  const benchCpu = process.cpuUsage(cpuBefore.bench);
  const cpuPercent = {
    engine: ((engine.cpuSeconds() - cpuBefore.engine) / result.seconds) * 100,
    benchProcess: ((benchCpu.user + benchCpu.system) / 1e6 / result.seconds) * 100,
  };
  return { result, cpuPercent, finishedBefore, countsAfter: await database.eventStatusCounts() };
}

function intakeFigures(ctx: ScenarioContext, database: BenchDatabase, engine: BenchEngine, run: TimedRun): IntakeFigures {
  const { result, countsAfter } = run;
  const processed = finished(countsAfter) - run.finishedBefore;
  const acknowledged = result.statuses['202'] ?? 0;
  return {
    database: database.name,
    layout: engine.layout,
    connections: ctx.options.connections,
    seconds: result.seconds,
    sent: result.sent,
    acknowledged,
    duplicates: result.statuses['200'] ?? 0,
    failed: failures(result.statuses),
    eventsPerSecond: acknowledged / result.seconds,
    latencyMs: result.latencyMs,
    ranOut: result.ranOut,
    engineMemory: engine.memory(),
    processedDuringRun: processed,
    processedPerSecond: processed / result.seconds,
    backlogAtEnd: countsAfter.received ?? 0,
    cpuPercent: run.cpuPercent,
  };
}

export async function runIntake(ctx: ScenarioContext, database: BenchDatabase): Promise<IntakeFigures> {
  const { options } = ctx;
  const tag = `${database.name}_${Date.now().toString(36)}`;
  ctx.progress(`intake (${database.name}): preparing ${options.maxEvents.toLocaleString('en-US')} signed events …`);
  const warmUp = prepareEvents(Math.max(2_000, options.connections * 20), BENCH_SECRET, intakeEvent(`${tag}_warm`));
  const events = prepareEvents(options.maxEvents, BENCH_SECRET, intakeEvent(tag));
  const engine = await startEngine({ layout: options.layout, databaseUrl: database.url, serviceUrl: ctx.serviceUrl, profileDir: profileDirFor(ctx, 'intake', database.name) }, ctx.cleanup);
  const poster = new WebhookPoster(engine.url, options.connections);
  try {
    // Opens every keep-alive connection and warms the JIT before the clock starts.
    await closedLoop(poster, warmUp, options.connections, 2_000);
    return intakeFigures(ctx, database, engine, await timedRun(ctx, engine, database, poster, events));
  } finally {
    poster.close();
    await engine.stop();
  }
}
