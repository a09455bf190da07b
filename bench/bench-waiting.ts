/**
 * Do waiting executions cost anything while they wait (issue 11)? A delay is a
 * row due at its resume time, claimed like other work when due: while it
 * waits it should hold no memory, no timer and no worker, and slow no claim.
 * Per database, on one fresh database, two runs of a fresh engine process:
 *
 *   1 waiting   one execution waiting three days (the template the engine
 *               made from one event: bench-waiting-seed.ts);
 *   N waiting   the same database after the template was copied to
 *               `--waiting` (100,000) waiting executions.
 *
 * Each run: time to /health/ready; the engine idle for a few seconds (its RSS
 * over the second half of that, median, and its CPU); ordinary events sent at
 * a fixed rate in an open loop, matched by a rule with one action (their
 * latency from the webhook's due time to the action's arrival at the fake
 * service); peak RSS over the process's life. Once the engine has stopped
 * after the second run, the benchmark times empty claims of action runs
 * (nothing due) with the engine's own WorkQueue.claimActionRuns, in turns on
 * the database and on a copy of it made after the first run (bench-twin.ts),
 * so that both states are timed in the same moments. At the end, no
 * waiting execution may have been touched: every one still `waiting`, every
 * delay run `pending`, unleased, never attempted and unchanged.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../src/clock.js';
import type { Database } from '../src/database/database.service.js';
import { WorkQueue } from '../src/processing/work-queue.js';
import { openDatabase } from '../test/support/storage.js';
import { waitUntil } from '../test/support/wait.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import { BENCH_RULE, BENCH_SECRET, startEngine, writeRules, type BenchEngine } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { openLoop, prepareEvents, summarize, WebhookPoster, type LatencySummary } from './bench-load.js';
import { drain, epochNow, systemLabel, type ScenarioContext } from './bench-systems.js';
import { int, ms, ratio, seconds, table } from './bench-tables.js';
import { twinOf } from './bench-twin.js';
import { copyTemplate, findTemplate, settleStorage, stillWaiting, tableCounts, uncopiedTables, WAIT_RULE, waitEvent, type Template } from './bench-waiting-seed.js';

export interface WaitingRun {
  waiting: number;
  /** From spawning the engine to /health/ready. */
  readySeconds: number;
  /** RSS of the idle engine (median over the second half of the idle period). */
  steadyRssMb: number;
  /** Peak RSS over the process's life (VmHWM), the ordinary events included; undefined in process. */
  peakRssMb?: number;
  /** Share of one core the idle engine used. */
  idleCpuPercent: number;
  /** Empty claims of action runs, timed with the engine stopped. */
  claimMs: LatencySummary;
  /** Runs those claims took: 0 unless something was due. */
  claimed: number;
  /** Ordinary events: webhook due → action arrived. */
  latencyMs: LatencySummary;
  sent: number;
  missing: number;
}

export interface WaitingFigures {
  system: DatabaseName;
  waiting: number;
  /** How long copying the template to `waiting` executions took. */
  seedSeconds: number;
  empty: WaitingRun;
  seeded: WaitingRun;
  /** Executions no longer waiting and delay runs claimed, leased or changed, after both runs: 0 expected. */
  touched: number;
  /** With `waiting` / with one. */
  ratios: { claimP50: number; steadyRss: number; peakRss: number; e2eP50: number; e2eP99: number };
}

/** The engine's own batch (workers.ts ACTION_BATCH): what its action loop asks for. */
const CLAIM_LIMIT = 32;
const CLAIM_LEASE_MS = 60_000;
const WARM_CLAIMS = 10;

function sizes(quick: boolean) {
  // A rate the engine keeps up with even on a busy 2-core machine: the latency of one event, not of a queue.
  // Quick: four engine runs of a second or so each, so that `--quick` stays within a minute.
  return { idleS: quick ? 1 : 5, rate: 50, sendS: quick ? 1 : 10, warmEvents: quick ? 10 : 100, claims: quick ? 200 : 1_000 };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** The engine idle: its RSS over the second half of `idleS`, and its CPU over all of it. */
async function idle(engine: BenchEngine, idleS: number): Promise<Pick<WaitingRun, 'steadyRssMb' | 'idleCpuPercent'>> {
  const cpuBefore = engine.cpuSeconds();
  const started = performance.now();
  const samples: number[] = [];
  while (performance.now() - started < idleS * 1000) {
    await delay(250);
    if (performance.now() - started >= idleS * 500) samples.push(engine.memory().rssMb);
  }
  const elapsedS = (performance.now() - started) / 1000;
  return { steadyRssMb: median(samples), idleCpuPercent: ((engine.cpuSeconds() - cpuBefore) / elapsedS) * 100 };
}

/** `count` matching events at `rate` (open loop); each one's latency to its action's arrival. */
async function sendOrdinary(ctx: ScenarioContext, poster: WebhookPoster, what: string, count: number, rate: number) {
  const prefix = runPrefix(what);
  const events = signedEvents('matching', prefix, count);
  const arrivals = await ctx.fake.beginRun(prefix, count);
  const sent = await openLoop(poster, events, rate);
  const acked = sent.statuses['202'] ?? 0;
  await drain(() => acked - arrivals.arrived(), ctx.options.drainLimitS * 1000);
  const latencies = new Float64Array(count);
  let n = 0;
  for (let i = 0; i < count; i++) if (arrivals.arrivals[i] !== 0) latencies[n++] = Math.max(0, arrivals.arrivals[i] - sent.sentAt[i]);
  return { sent: count, missing: count - n, latencyMs: summarize(latencies, n) };
}

async function ordinaryEvents(ctx: ScenarioContext, engine: BenchEngine): Promise<Pick<WaitingRun, 'latencyMs' | 'sent' | 'missing'>> {
  const { rate, sendS, warmEvents } = sizes(ctx.options.quick);
  const poster = new WebhookPoster(engine.url, 64);
  try {
    // The fresh process's first requests pay for its JIT and connections: not counted, in either run.
    await sendOrdinary(ctx, poster, 'wait_warm', warmEvents, rate);
    return await sendOrdinary(ctx, poster, 'wait_ordinary', Math.round(rate * sendS), rate);
  } finally {
    poster.close();
  }
}

/** Empty claims timed in turns of CLAIM_TURN on each database, so that both states are timed in the same moments. */
const CLAIM_TURN = 50;

/**
 * Empty claims, as the engine's action loop makes them, on each of `stores` as
 * the engine left it: `count` on each, in turns (bench-twin.ts says why), the
 * order of the two swapped every round.
 */
async function timeClaims(stores: Database[], count: number): Promise<Array<Pick<WaitingRun, 'claimMs' | 'claimed'>>> {
  const queues = stores.map((store) => new WorkQueue(store, systemClock));
  const durations = stores.map(() => new Float64Array(count));
  const claimed = stores.map(() => 0);
  const claim = async (k: number, i: number) => {
    const started = performance.now();
    claimed[k] += (await queues[k].claimActionRuns(CLAIM_LIMIT, CLAIM_LEASE_MS)).length;
    if (i >= 0) durations[k][i] = performance.now() - started;
  };
  for (let k = 0; k < queues.length; k++) for (let i = -WARM_CLAIMS; i < 0; i++) await claim(k, i);
  for (let from = 0, round = 0; from < count; from += CLAIM_TURN, round++) {
    const order = queues.map((_, k) => (round % 2 === 0 ? k : queues.length - 1 - k));
    for (const k of order) for (let i = from; i < Math.min(count, from + CLAIM_TURN); i++) await claim(k, i);
  }
  return stores.map((_, k) => ({ claimMs: summarize(durations[k], count), claimed: claimed[k] }));
}

type Starter = () => Promise<BenchEngine>;

/** One run of a fresh engine on the database as it is; its claims are timed afterwards (timeClaims). */
async function measureRun(ctx: ScenarioContext, start: Starter, store: Database, waiting: number): Promise<Omit<WaitingRun, 'claimMs' | 'claimed'>> {
  await settleStorage(store);
  const spawned = epochNow();
  const engine = await start();
  const readySeconds = (epochNow() - spawned) / 1000;
  try {
    const still = await idle(engine, sizes(ctx.options.quick).idleS);
    const load = await ordinaryEvents(ctx, engine);
    return { waiting, readySeconds, ...still, ...load, peakRssMb: engine.memory().peakRssMb };
  } finally {
    await engine.stop();
  }
}

/** The engine evaluates one event against WAIT_RULE and commits its waiting execution: the template. */
async function makeTemplate(start: Starter, store: Database, eventId: string): Promise<Template> {
  const engine = await start();
  try {
    const before = await tableCounts(store);
    const poster = new WebhookPoster(engine.url, 1);
    const status = await poster.post(prepareEvents(1, BENCH_SECRET, () => waitEvent(eventId))[0]).finally(() => poster.close());
    if (status !== 202) throw new Error(`the template event was answered ${status}, not 202`);
    const template = await waitUntil(() => findTemplate(store, eventId), { timeoutMs: 15_000, what: 'the engine to commit the template\'s waiting execution' });
    const uncopied = uncopiedTables(before, await tableCounts(store));
    if (uncopied.length > 0) throw new Error(`the template's commit also wrote to ${uncopied.join(', ')}, which bench-waiting-seed.ts does not copy`);
    return template;
  } finally {
    await engine.stop();
  }
}

function ratiosOf(empty: WaitingRun, seeded: WaitingRun): WaitingFigures['ratios'] {
  const of = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? a / b : 0);
  return {
    claimP50: of(seeded.claimMs.p50, empty.claimMs.p50),
    steadyRss: of(seeded.steadyRssMb, empty.steadyRssMb),
    peakRss: of(seeded.peakRssMb, empty.peakRssMb),
    e2eP50: of(seeded.latencyMs.p50, empty.latencyMs.p50),
    e2eP99: of(seeded.latencyMs.p99, empty.latencyMs.p99),
  };
}

async function measureOn(ctx: ScenarioContext, db: BenchDatabase, store: Database, start: Starter): Promise<WaitingFigures> {
  const total = ctx.options.waiting;
  const what = `waiting (${db.name})`;
  const prefix = runPrefix(`wait_${db.name}`);
  ctx.progress(`${what}: the engine makes one waiting execution …`);
  const template = await makeTemplate(start, store, `${prefix}0`);
  ctx.progress(`${what}: 1 execution waiting …`);
  const empty = await measureRun(ctx, start, store, 1);
  const twin = await twinOf(db, store, ctx.cleanup, ctx.options.postgresUrl);
  try {
    ctx.progress(`${what}: copying it to ${int(total)} …`);
    const copying = performance.now();
    await copyTemplate(store, template, prefix, total);
    const seedSeconds = (performance.now() - copying) / 1000;
    ctx.progress(`${what}: ${int(total)} executions waiting (copied in ${seconds(seedSeconds)}) …`);
    const seeded = await measureRun(ctx, start, store, total);
    ctx.progress(`${what}: empty claims, in turns on a copy of the database with 1 waiting and on the one with ${int(total)} …`);
    await settleStorage(twin.store);
    await settleStorage(store);
    const [emptyClaims, seededClaims] = await timeClaims([twin.store, store], sizes(ctx.options.quick).claims);
    const left = await stillWaiting(store, template);
    const runs = { empty: { ...empty, ...emptyClaims }, seeded: { ...seeded, ...seededClaims } };
    return { system: db.name, waiting: total, seedSeconds, ...runs, touched: 2 * total - left.executions - left.runs, ratios: ratiosOf(runs.empty, runs.seeded) };
  } finally {
    await twin.drop();
  }
}

export function runWaiting(ctx: ScenarioContext, system: DatabaseName): Promise<WaitingFigures> {
  return ctx.withDatabase(system, async (db) => {
    const rulesDir = writeRules(ctx.cleanup, [BENCH_RULE, WAIT_RULE]);
    const settings = { layout: ctx.options.layout, databaseUrl: db.url, serviceUrl: ctx.fake.url, rulesDir, readyTimeoutMs: 120_000 };
    const start = () => startEngine(settings, ctx.cleanup);
    // The benchmark's own connection runs the engine's migrations, which make the schema.
    const store = await openDatabase(db.url);
    const close = ctx.cleanup.add(`close the benchmark's connection to ${db.where}`, () => store.dataSource.destroy().then(() => undefined));
    try {
      return await measureOn(ctx, db, store, start);
    } finally {
      await close();
    }
  });
}

const mb = (n: number | undefined): string => (n === undefined ? '–' : `${int(n)} MB`);
/** An empty claim on SQLite takes tens of microseconds: three decimals below 1 ms. */
export const claimTime = (n: number): string => (n < 1 ? `${n.toFixed(3)} ms` : ms(n));

function rows(f: WaitingFigures): string[][] {
  const run = (label: string, r: WaitingRun) => [
    label, int(r.waiting), seconds(r.readySeconds), mb(r.steadyRssMb), mb(r.peakRssMb), `${r.idleCpuPercent.toFixed(1)} %`,
    claimTime(r.claimMs.p50), claimTime(r.claimMs.p99), ms(r.latencyMs.p50), ms(r.latencyMs.p99), int(r.missing),
  ];
  const r = f.ratios;
  return [
    run(systemLabel(f.system), f.empty),
    run('', f.seeded),
    ['', `${int(f.waiting)} / 1`, '', ratio(r.steadyRss), ratio(r.peakRss), '', ratio(r.claimP50), '', ratio(r.e2eP50), ratio(r.e2eP99), ''],
  ];
}

export function waitingLines(all: WaitingFigures[]): string[] {
  if (all.length === 0) return [];
  const header = ['', 'waiting', 'ready', 'idle RSS', 'peak RSS', 'idle CPU', 'claim p50', 'claim p99', 'e2e p50', 'e2e p99', 'not arrived'];
  const notes = all.map((f) =>
    `    ${systemLabel(f.system)}: ${int(f.touched)} of ${int(f.waiting)} waiting executions touched (claimed, resumed, leased or changed); ` +
    `${int(f.seeded.claimed + f.empty.claimed)} runs taken by the timed claims; copies made in ${seconds(f.seedSeconds)}; ordinary events: ${int(f.seeded.sent)} per run`);
  return [
    'waiting executions (a delay due in 3 days each; claim = one empty claim of action runs, engine stopped; e2e = ordinary events at a fixed rate, webhook to action):',
    ...table([header, ...all.flatMap(rows)]),
    ...notes,
  ];
}
