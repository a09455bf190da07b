/**
 * `npm run bench -- --replicas N` (issue 9): the closed loop end to end on
 * PostgreSQL with 1, 2 … N engine processes sharing one database, the load
 * spread over them (each of the `connections` lanes sends to the replicas in
 * turn, as a round-robin balancer would). Each count gets a fresh database and
 * fresh processes; the figures are the actions that reached the fake service
 * per second while sending lasted, the webhook-to-action latency, the engine
 * CPU of all replicas together, and `pg_stat_database` transactions and rows
 * per event (bench-pgstats.ts), with the start-up of one engine subtracted per
 * replica. On a machine with few cores more replicas mostly add coordination
 * (claims that skip each other's locked rows, heartbeats, budget grants), so
 * the table is a price list of scale-out, not a speed-up; the printout says so.
 */
import { cpus } from 'node:os';
import type { BenchDatabase } from './bench-databases.js';
import { startEngine, type BenchEngine } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { closedLoop, summarize, WebhookPoster, type LatencySummary, type PreparedEvent } from './bench-load.js';
import { mapCounters, settledCounters, subtract, type PgCounters } from './bench-pgstats.js';
import { drain, epochNow, type ScenarioContext } from './bench-systems.js';
import { decimal, int, ms, table } from './bench-tables.js';

export interface ReplicaFigures {
  replicas: number;
  seconds: number;
  acknowledged: number;
  /** Actions arrived at the fake service while sending lasted, per second. */
  eventsPerSecond: number;
  e2eLatencyMs: LatencySummary;
  /** Acknowledged events whose action had not arrived when the drain limit passed. */
  leftAfterDrain: number;
  duplicateActions: number;
  /** CPU of all replicas together, from the first send to the end of the drain. */
  cpuSeconds: number;
  eventsPerCpuSecond: number;
  /** Per event handled (warm-up included), the start-up of the replicas left out. */
  postgres: PgCounters;
}

/** Sends each event to the next replica in turn: the lanes of one closed loop spread over them all. */
class SpreadPoster extends WebhookPoster {
  private next = 0;

  constructor(private readonly posters: WebhookPoster[]) {
    // closedLoop takes a WebhookPoster; this one's own connection is never used.
    super(posters[0] ? 'http://127.0.0.1:1' : '', 1);
  }

  override post(event: PreparedEvent): Promise<number> {
    return this.posters[this.next++ % this.posters.length].post(event);
  }

  override close(): void {
    super.close();
    for (const poster of this.posters) poster.close();
  }
}

/** The first replica alone (it runs the migrations), then the others together. */
async function startReplicas(ctx: ScenarioContext, db: BenchDatabase, count: number): Promise<BenchEngine[]> {
  const settings = { layout: 'child' as const, databaseUrl: db.url, serviceUrl: ctx.fake.url };
  const first = await startEngine(settings, ctx.cleanup);
  const others = await Promise.all(Array.from({ length: count - 1 }, () => startEngine(settings, ctx.cleanup)));
  return [first, ...others];
}

/** What one engine's start-up and stop cost PostgreSQL, measured once and left out of the per-event figures. */
async function startupCost(ctx: ScenarioContext): Promise<PgCounters> {
  ctx.postgresStartup ??= await ctx.withDatabase('postgres', async (db) => {
    const before = await settledCounters(ctx.options.postgresUrl!, db.where);
    const [engine] = await startReplicas(ctx, db, 1);
    await engine.stop();
    return subtract(await settledCounters(ctx.options.postgresUrl!, db.where), before);
  });
  return ctx.postgresStartup;
}

const cpuOf = (engines: BenchEngine[]) => engines.reduce((sum, e) => sum + e.cpuSeconds(), 0);

/** Warm-up, then the timed closed loop, then the drain; resolves with what the figures need. */
async function load(ctx: ScenarioContext, engines: BenchEngine[], poster: WebhookPoster) {
  const { options } = ctx;
  const warmPrefix = runPrefix('warm_replicas');
  const warmArrivals = await ctx.fake.beginRun(warmPrefix, options.warmUpEvents);
  // A quick run stays under a minute with three counts: its warm-ups are shorter.
  const warm = await closedLoop(poster, signedEvents('matching', warmPrefix, options.warmUpEvents), options.connections, options.quick ? 1_000 : options.warmUpS * 1000);
  const warmAcked = warm.statuses['202'] ?? 0;
  await drain(() => warmAcked - warmArrivals.arrived(), options.drainLimitS * 1000, 50);
  const count = Math.min(options.maxEvents, Math.ceil(Math.max(10_000, (warmAcked / warm.seconds) * 5) * options.durationS));
  const prefix = runPrefix(`replicas${engines.length}`);
  const arrivals = await ctx.fake.beginRun(prefix, count);
  const cpuStart = cpuOf(engines);
  const result = await closedLoop(poster, signedEvents('matching', prefix, count), options.connections, options.durationS * 1000);
  const windowEnd = epochNow();
  const acknowledged = result.statuses['202'] ?? 0;
  const leftAfterDrain = await drain(() => acknowledged - arrivals.arrived(), options.drainLimitS * 1000, 20);
  return { warmAcked, result, windowEnd, acknowledged, leftAfterDrain, arrivals, cpuSeconds: cpuOf(engines) - cpuStart };
}

async function runReplicas(ctx: ScenarioContext, db: BenchDatabase, count: number, startup: PgCounters): Promise<ReplicaFigures> {
  const serverUrl = ctx.options.postgresUrl!;
  const before = await settledCounters(serverUrl, db.where);
  const engines = await startReplicas(ctx, db, count);
  const poster = new SpreadPoster(engines.map((e) => new WebhookPoster(e.url, ctx.options.connections)));
  let run;
  try {
    ctx.progress(`replicas: ${count} on one PostgreSQL database, ${ctx.options.connections} connections spread over them for ${ctx.options.durationS} s …`);
    run = await load(ctx, engines, poster);
  } finally {
    poster.close();
    await Promise.all(engines.map((e) => e.stop()));
  }
  const { result, arrivals } = run;
  const latencies = new Float64Array(result.sent);
  let arrived = 0;
  let inWindow = 0;
  for (let i = 0; i < result.sent; i++) {
    const at = arrivals.arrivals[i];
    if (at === 0) continue;
    latencies[arrived++] = Math.max(0, at - result.sentAt[i]);
    if (at <= run.windowEnd) inWindow++;
  }
  const total = subtract(await settledCounters(serverUrl, db.where), before);
  const handled = run.warmAcked + run.acknowledged - run.leftAfterDrain;
  const per = (n: number) => (handled > 0 ? n / handled : 0);
  const net = subtract(total, mapCounters((n) => n * count, startup));
  return {
    replicas: count, seconds: result.seconds, acknowledged: run.acknowledged,
    eventsPerSecond: inWindow / result.seconds,
    e2eLatencyMs: summarize(latencies, arrived),
    leftAfterDrain: run.leftAfterDrain, duplicateActions: arrivals.duplicates(),
    cpuSeconds: run.cpuSeconds, eventsPerCpuSecond: run.cpuSeconds > 0 ? arrived / run.cpuSeconds : 0,
    postgres: mapCounters(per, net),
  };
}

/** 1, 2 … `upTo` replicas, each on a fresh database; a count that fails is recorded and the next still runs. */
export async function runReplicaCounts(ctx: ScenarioContext, upTo: number, onError: (count: number, error: unknown) => void): Promise<ReplicaFigures[]> {
  const startup = await startupCost(ctx);
  const figures: ReplicaFigures[] = [];
  for (let count = 1; count <= upTo; count++) {
    try {
      figures.push(await ctx.withDatabase('postgres', (db) => runReplicas(ctx, db, count, startup)));
    } catch (error) {
      onError(count, error);
    }
  }
  return figures;
}

export function replicaLines(figures: ReplicaFigures[]): string[] {
  if (figures.length === 0) return [];
  const one = figures.find((f) => f.replicas === 1);
  const header = ['replicas', 'events/s', '× 1 replica', 'acked/s', 'e2e p50', 'e2e p99', 'transactions/event', 'rows read/event', 'rows written/event', 'events/CPU-s', 'left', 'twice'];
  const rows = figures.map((f) => [
    String(f.replicas), int(f.eventsPerSecond), one && one.eventsPerSecond > 0 ? `${(f.eventsPerSecond / one.eventsPerSecond).toFixed(2)}×` : '–',
    int(f.acknowledged / f.seconds),
    ms(f.e2eLatencyMs.p50), ms(f.e2eLatencyMs.p99), decimal(f.postgres.transactions), decimal(f.postgres.rowsRead), decimal(f.postgres.rowsWritten),
    int(f.eventsPerCpuSecond), int(f.leftAfterDrain), int(f.duplicateActions),
  ]);
  return [
    '',
    'replicas on one PostgreSQL database (closed loop end to end, load spread over them; per event: pg_stat_database, start-up left out):',
    ...table([header, ...rows]),
    `  note: this machine has ${cpus().length} cores shared by the replicas, PostgreSQL and the load generator: more replicas show the cost of`,
    '  coordinating them (claims past each other\'s locked rows, heartbeats, shared budget grants), not a speed-up.',
  ];
}
