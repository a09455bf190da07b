/**
 * Closed loops: `connections` clients, each sending its next signed webhook as
 * soon as the previous one is answered, for `--seconds`, against the reference
 * server, the engine on SQLite and the engine on PostgreSQL in turn (a fresh
 * process and database each), over keep-alive connections or a new connection
 * per webhook.
 *
 *   e2e      every event matches (one task.create each); the figure is the
 *            actions that reached the fake service while sending lasted, per
 *            second, and the latency from sending a webhook to the arrival of
 *            its action;
 *   intake   no event matches (the rule is evaluated and fails); the figure is
 *            webhooks acknowledged per second.
 *
 * After sending stops, the run waits (at most the drain limit) until the work
 * acknowledged is done: every action arrived (e2e), every event processed
 * (intake; the reference processes nothing further). CPU is counted from the
 * first send to the end of that drain, so events per CPU-second include the
 * work done late. On PostgreSQL, e2e runs also read the database's counters
 * (bench-pgstats.ts).
 */
import type { BenchDatabase } from './bench-databases.js';
import type { BenchEngine, CpuSplit, EngineMemory } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import type { ArrivalLog } from './bench-fake-service.js';
import { closedLoop, summarize, WebhookPoster, type ClosedLoopResult, type ConnectionMode, type LatencySummary, type PreparedEvent } from './bench-load.js';
import type { Layout } from './bench-options.js';
import { BackendCpu, hotUpdates, mapCounters, settledCounters, subtract, type HotUpdates, type PgCounters } from './bench-pgstats.js';
import { drain, epochNow, isEngine, startSystem, type ScenarioContext, type SystemName } from './bench-systems.js';

export type LoadKind = 'e2e' | 'intake';

export interface ClosedLoopFigures {
  system: SystemName;
  kind: LoadKind;
  connectionMode: ConnectionMode;
  connections: number;
  layout: Layout;
  seconds: number;
  sent: number;
  acknowledged: number;
  /** Answers other than 202/200, and requests that got no answer (status 0). */
  failed: Record<string, number>;
  ranOut: boolean;
  acknowledgedPerSecond: number;
  ackLatencyMs: LatencySummary;
  /** The headline: e2e, actions arrived during sending per second; intake, acknowledged per second. */
  eventsPerSecond: number;
  /** e2e: from sending the webhook to its action's arrival (events whose action arrived, drain included). */
  e2eLatencyMs?: LatencySummary;
  /** Work acknowledged but not done when sending stopped, and how long it took to finish (or the limit). */
  backlogAtEnd: number;
  drainSeconds: number;
  /** Work still not done at the drain limit. */
  leftAfterDrain: number;
  /** e2e: actions that arrived twice for one event. */
  duplicateActions: number;
  /** Events fully handled (action arrived / event processed) per CPU-second of the system, drain included. */
  cpuSeconds: number;
  eventsPerCpuSecond: number;
  /**
   * The same CPU per event handled, in µs, by kind and thread (child processes only): the main thread's user and
   * system time, its share of one core over the run and its drain, and the other threads' (V8's compilers and
   * garbage collector, libuv's pool).
   */
  cpuPerEvent?: CpuPerEvent;
  /** PostgreSQL: the CPU of its backends serving this database, when visible, and events per CPU-second of both. */
  databaseCpuSeconds?: number;
  eventsPerCpuSecondWithDatabase?: number;
  /** Load generator + fake service (this process), share of one core while sending. */
  benchCpuPercent: number;
  memory: EngineMemory;
  postgres?: PostgresPerEvent;
  /**
   * Interleaved runs (bench-interleaved.ts): each slice's window (epoch ms) and figure, in the order sent. The
   * figures above are over all slices.
   */
  slices?: SliceFigures[];
}

export interface SliceFigures {
  windowStart: number;
  windowEnd: number;
  eventsPerSecond: number;
}

export interface CpuPerEvent {
  mainUserUs: number;
  mainSystemUs: number;
  /** The main thread's CPU over the time from the timed run's start to its drain, as a share of one core (0–1). */
  mainBusy: number;
  otherThreadsUs: number;
}

/** CPU per event from two readings `seconds` apart, `handled` events between them. */
export function cpuPerEvent(start: CpuSplit, end: CpuSplit, handled: number, seconds: number): CpuPerEvent | undefined {
  if (handled <= 0 || seconds <= 0) return undefined;
  const mainUser = end.mainUser - start.mainUser;
  const mainSystem = end.mainSystem - start.mainSystem;
  const others = end.user + end.system - (start.user + start.system) - mainUser - mainSystem;
  const us = (s: number) => (s * 1e6) / handled;
  return { mainUserUs: us(mainUser), mainSystemUs: us(mainSystem), mainBusy: (mainUser + mainSystem) / seconds, otherThreadsUs: us(Math.max(0, others)) };
}

export interface PostgresPerEvent {
  events: number;
  perEvent: PgCounters;
  /** Updates per event of the rows of UPDATED_TABLES (start-up and warm-up included), and the share of them that were HOT. */
  updates?: { perEvent: number; hotShare: number };
}

/** One timed run, or one slice of an interleaved one (bench-interleaved.ts). */
export interface Timed {
  result: ClosedLoopResult;
  /** The fake service's arrivals of this run's actions (a slice's own). */
  arrivals: ArrivalLog;
  windowStart: number;
  windowEnd: number;
  cpu: { start: number; end: number; drained: number };
  /** By kind and thread, at the start and once drained (child processes only). */
  split?: { start: CpuSplit; drained: CpuSplit };
  /** The load generator's and fake service's CPU (this process) while sending. */
  benchCpuSeconds: number;
  backlogAtEnd: number;
  leftAfterDrain: number;
  drainedAt: number;
  databaseCpuSeconds?: number;
}

const acknowledged = (r: ClosedLoopResult) => r.statuses['202'] ?? 0;

function failures(statuses: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(statuses).filter(([status]) => status !== '202' && status !== '200'));
}

/** Intake on the engine: events received and not yet processed. The reference and the flow engine keep no such count. */
export function waitingWork(system: SystemName, database: BenchDatabase): () => Promise<number> {
  return isEngine(system) ? () => database.waiting() : async () => 0;
}

/**
 * Opens the connections and warms the JIT, then waits for that work to be done
 * so it does not spill into the timed run. Resolves with the events
 * acknowledged and their rate, which sizes the timed run's prepared events.
 */
export async function warmUp(ctx: ScenarioContext, kind: LoadKind, poster: WebhookPoster, remaining: () => Promise<number>) {
  const prefix = runPrefix('warm');
  const arrivals = await ctx.fake.beginRun(prefix, ctx.options.warmUpEvents);
  const result = await closedLoop(poster, signedEvents(kind === 'e2e' ? 'matching' : 'unmatched', prefix, ctx.options.warmUpEvents), ctx.options.connections, ctx.options.warmUpS * 1000);
  const left = kind === 'e2e' ? () => acknowledged(result) - arrivals.arrived() : remaining;
  await drain(left, ctx.options.drainLimitS * 1000, 50);
  return { acknowledged: acknowledged(result), perSecond: acknowledged(result) / result.seconds };
}

/**
 * Enough events for the timed run: a warmed-up system is much faster than its
 * warm-up (cold JIT, connections opening), so 5 × the warm-up's rate and at
 * least 10,000/s, within --events (a run that runs out says so).
 */
export function timedEventCount(ctx: ScenarioContext, warmUpRate: number): number {
  const { options } = ctx;
  return Math.min(options.maxEvents, Math.ceil(Math.max(10_000, warmUpRate * 5) * options.durationS));
}

/** Sends `events` for `seconds` (the run's duration unless said), then waits until the work acknowledged is done. */
export async function timedRun(ctx: ScenarioContext, target: BenchEngine, events: PreparedEvent[], poster: WebhookPoster, work: {
  kind: LoadKind; arrivals: ArrivalLog; remaining: () => Promise<number>; backends?: BackendCpu; seconds?: number;
}): Promise<Timed> {
  const { options } = ctx;
  await work.backends?.start();
  const cpuStart = target.cpuSeconds();
  const splitStart = target.cpuSplit?.();
  const benchStart = process.cpuUsage();
  const windowStart = epochNow();
  const result = await closedLoop(poster, events, options.connections, (work.seconds ?? options.durationS) * 1000);
  const windowEnd = epochNow();
  const cpuEnd = target.cpuSeconds();
  const bench = process.cpuUsage(benchStart);
  const left = work.kind === 'e2e' ? () => acknowledged(result) - work.arrivals.arrived() : work.remaining;
  const backlogAtEnd = await left();
  const leftAfterDrain = await drain(left, options.drainLimitS * 1000, work.kind === 'e2e' ? 20 : 100);
  const splitDrained = target.cpuSplit?.();
  return {
    result, arrivals: work.arrivals, windowStart, windowEnd, backlogAtEnd, leftAfterDrain,
    drainedAt: epochNow(),
    cpu: { start: cpuStart, end: cpuEnd, drained: target.cpuSeconds() },
    split: splitStart && splitDrained ? { start: splitStart, drained: splitDrained } : undefined,
    benchCpuSeconds: (bench.user + bench.system) / 1e6,
    databaseCpuSeconds: await work.backends?.stop(),
  };
}

/** e2e: actions arrived in the window, latencies, when the last one arrived (bench-pair.ts too). */
export function joinArrivals(result: ClosedLoopResult, arrivals: Float64Array, windowEnd: number) {
  const latencies = new Float64Array(result.sent);
  let n = 0;
  let inWindow = 0;
  let lastArrival = windowEnd;
  for (let i = 0; i < result.sent; i++) {
    const arrived = arrivals[i];
    if (arrived === 0) continue;
    latencies[n++] = Math.max(0, arrived - result.sentAt[i]);
    if (arrived <= windowEnd) inWindow++;
    lastArrival = Math.max(lastArrival, arrived);
  }
  const latencyMs = summarize(latencies, n);
  return { delivered: n, inWindow, latencyMs, latencies: latencies.subarray(0, n), lastArrival };
}

/** Each slice's CPU split between its start and its drain, added up (undefined if any slice has none). */
function splitTotal(slices: Timed[]): { start: CpuSplit; drained: CpuSplit } | undefined {
  const zero: CpuSplit = { user: 0, system: 0, mainUser: 0, mainSystem: 0 };
  const total = { ...zero };
  for (const t of slices) {
    if (!t.split) return undefined;
    for (const key of ['user', 'system', 'mainUser', 'mainSystem'] as const) total[key] += t.split.drained[key] - t.split.start[key];
  }
  return { start: zero, drained: total };
}

/** All answered requests' latencies, or the webhook-to-action ones, over several slices. */
function summarizeAll(parts: Float64Array[]): LatencySummary {
  const all = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return summarize(all, all.length);
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** How long the work left when sending stopped took to finish: e2e, until the last action arrived (or the drain gave up). */
function drainSecondsOf(t: Timed, lastArrival: number | undefined): number {
  const drainEnd = lastArrival !== undefined && t.leftAfterDrain === 0 ? lastArrival : t.drainedAt;
  return t.backlogAtEnd > 0 ? Math.max(0, drainEnd - t.windowEnd) / 1000 : 0;
}

/**
 * A system's figures from its timed run, or from the slices of an interleaved one added up: events and seconds
 * summed, latencies over all of them, the backlog and drain the largest any slice left, CPU from each slice's start
 * to its drain.
 */
export function figures(ctx: ScenarioContext, run: { system: SystemName; kind: LoadKind; mode: ConnectionMode }, target: BenchEngine, slices: Timed[]): ClosedLoopFigures {
  const e2e = run.kind === 'e2e';
  const joined = slices.map((t) => (e2e ? joinArrivals(t.result, t.arrivals.arrivals, t.windowEnd) : undefined));
  const acked = sum(slices.map((t) => acknowledged(t.result)));
  const handled = e2e ? sum(joined.map((j) => j!.delivered)) : acked - sum(slices.map((t) => t.leftAfterDrain));
  const seconds = sum(slices.map((t) => t.result.seconds));
  const cpuSeconds = sum(slices.map((t) => t.cpu.drained - t.cpu.start));
  const statuses: Record<string, number> = {};
  for (const t of slices) for (const [status, n] of Object.entries(t.result.statuses)) statuses[status] = (statuses[status] ?? 0) + n;
  const databaseCpu = slices.map((t) => t.databaseCpuSeconds);
  const databaseCpuSeconds = databaseCpu.every((s) => s !== undefined) ? sum(databaseCpu as number[]) : undefined;
  const split = splitTotal(slices);
  const busySeconds = sum(slices.map((t) => (t.drainedAt - t.windowStart) / 1000));
  return {
    system: run.system, kind: run.kind, connectionMode: run.mode, connections: ctx.options.connections, layout: target.layout,
    seconds, sent: sum(slices.map((t) => t.result.sent)), acknowledged: acked, failed: failures(statuses), ranOut: slices.some((t) => t.result.ranOut),
    acknowledgedPerSecond: acked / seconds,
    ackLatencyMs: summarizeAll(slices.map((t) => t.result.ackLatencies)),
    eventsPerSecond: (e2e ? sum(joined.map((j) => j!.inWindow)) : acked) / seconds,
    e2eLatencyMs: e2e ? summarizeAll(joined.map((j) => j!.latencies)) : undefined,
    backlogAtEnd: Math.max(...slices.map((t) => t.backlogAtEnd)),
    drainSeconds: Math.max(...slices.map((t, i) => drainSecondsOf(t, joined[i]?.lastArrival))),
    leftAfterDrain: sum(slices.map((t) => t.leftAfterDrain)),
    duplicateActions: sum(slices.map((t) => t.arrivals.duplicates())),
    cpuSeconds,
    eventsPerCpuSecond: cpuSeconds > 0 ? handled / cpuSeconds : 0,
    cpuPerEvent: split && cpuPerEvent(split.start, split.drained, handled, busySeconds),
    databaseCpuSeconds,
    eventsPerCpuSecondWithDatabase: databaseCpuSeconds === undefined ? undefined : handled / (cpuSeconds + databaseCpuSeconds),
    benchCpuPercent: (sum(slices.map((t) => t.benchCpuSeconds)) / sum(slices.map((t) => (t.windowEnd - t.windowStart) / 1000))) * 100,
    memory: target.memory(),
    slices: slices.length === 1 ? undefined : slices.map((t, i) => ({
      windowStart: t.windowStart, windowEnd: t.windowEnd,
      eventsPerSecond: (e2e ? joined[i]!.inWindow : acknowledged(t.result)) / t.result.seconds,
    })),
  };
}

/** What the engine's start-up and stop alone cost PostgreSQL, so that per-event figures leave it out. */
export async function postgresStartup(ctx: ScenarioContext): Promise<PgCounters> {
  ctx.postgresStartup ??= await ctx.withDatabase('postgres', async (db) => {
    const serverUrl = ctx.options.postgresUrl!;
    const before = await settledCounters(serverUrl, db.where);
    const engine = await startSystem(ctx, 'postgres', db, 'startup-cost');
    await engine.stop();
    return subtract(await settledCounters(serverUrl, db.where), before);
  });
  return ctx.postgresStartup;
}

export function perEvent(total: PgCounters, events: number, updates?: HotUpdates): PostgresPerEvent {
  const per = (n: number) => (events > 0 ? n / events : 0);
  return {
    events,
    perEvent: mapCounters(per, total),
    updates: updates === undefined ? undefined : { perEvent: per(updates.updates), hotShare: updates.updates > 0 ? updates.hot / updates.updates : 0 },
  };
}

/** One closed-loop run on a fresh system and database. */
export async function runClosedLoop(ctx: ScenarioContext, system: SystemName, kind: LoadKind, mode: ConnectionMode, database: BenchDatabase): Promise<ClosedLoopFigures> {
  const { options } = ctx;
  const measurePostgres = system === 'postgres' && kind === 'e2e';
  const startup = measurePostgres ? await postgresStartup(ctx) : undefined;
  const prefix = runPrefix(`${kind}_${system}`);
  const before = measurePostgres ? await settledCounters(options.postgresUrl!, database.where) : undefined;
  const target = await startSystem(ctx, system, database, `${kind}-${mode}`);
  const poster = new WebhookPoster(target.url, options.connections, mode);
  const remaining = waitingWork(system, database);
  let f: ClosedLoopFigures;
  let warmedUp = 0;
  try {
    ctx.progress(`closed loop ${kind} (${system}, ${mode}): warming up, then ${options.connections} connections for ${options.durationS} s …`);
    const warm = await warmUp(ctx, kind, poster, remaining);
    warmedUp = warm.acknowledged;
    const events = signedEvents(kind === 'e2e' ? 'matching' : 'unmatched', prefix, timedEventCount(ctx, warm.perSecond));
    const arrivals = await ctx.fake.beginRun(prefix, events.length);
    // The backends' CPU on intake too: there they are most of what an event costs the machine.
    const backends = system === 'postgres' ? new BackendCpu(options.postgresUrl!, database.where) : undefined;
    const timed = await timedRun(ctx, target, events, poster, { kind, arrivals, remaining, backends });
    f = figures(ctx, { system, kind, mode }, target, [timed]);
  } finally {
    poster.close();
    await target.stop();
  }
  if (before !== undefined && startup !== undefined) {
    const total = subtract(subtract(await settledCounters(options.postgresUrl!, database.where), before), startup);
    // A figure of its own: should the run's database not answer it, the rest stands.
    const updates = await hotUpdates(options.postgresUrl!, database.where).catch(() => undefined);
    // Events acknowledged but still waiting when the engine stopped cost little yet: left out.
    f.postgres = perEvent(total, warmedUp + f.acknowledged - f.leftAfterDrain, updates);
  }
  return f;
}
