/**
 * `npm run bench:pair`: two builds of the engine (or one build under two sets
 * of node options) measured at the same time, side by side, each with its own
 * SQLite database, fake service and closed loop of `--connections` clients,
 * in rounds; it prints, for each round and as the median over the rounds, B's
 * events per second and main-thread CPU per event as ratios to A's, and end
 * to end each engine's webhook-to-action p50 and p99 (and B's p50 over A's).
 *
 * Why: on this shared 2-core machine a closed loop's events/s moves by 15–30 %
 * between runs minutes apart (the reference's as much as the engine's), so a
 * change worth 3–5 % needs many runs in the order A B B A to show. Instruction
 * counts (`npm run bench:instructions`) do not move, but they see nothing of
 * what a change does to caches, page tables, system calls or the garbage
 * collector's threads. Two engines running at once share whatever the machine
 * does in each moment, so the ratio of their figures in one round is fair to
 * both, whichever moment it was. They also share the two cores with each other
 * and with the load generator, one process driving both: each runs at a lower
 * rate than alone (about 2,400 events/s with its main thread some 65 % busy, in
 * session 43), with smaller batches, so the ratios are those of that load. A
 * change may show only at saturation (session 44: the held events decided in
 * the outcomes' commit took the webhook-to-action p50 from 20 to 13–15 ms in
 * the benchmark's saturated closed loop; here both stayed at 11–12 ms).
 *
 *   npm run bench:pair -- [--a FILE] [--b FILE] [--a-args "…"] [--b-args "…"] [--rounds N] [--seconds S]
 *                         [--warmup S] [--connections N] [--intake] [--open-rate N] [--postgres] [--elsewhere]
 *
 * `--a`/`--b`: a bundle to run (default: dist-bench/bundle/main.js for both;
 * a copy made before a change must sit two folders below the repository, as
 * for bench:instructions, to find its packages). `--a-args`/`--b-args`: options
 * for that engine's node, space-separated (a V8 flag, `--use-largepages=on`).
 * End to end by default (every event matches, its action reaches the fake
 * service); `--intake`: no event matches. `--open-rate N`: instead of the
 * closed loops, each engine is sent N matching webhooks a second whatever its
 * answers do (an open loop, as `npm run bench`'s at half and a quarter of the
 * reference's rate), so that B's latency at a given load, and its CPU for it,
 * can be told from A's; the latency counts from the moment each webhook was
 * due. `--postgres`: each engine on a database of its own on the PostgreSQL
 * server at BENCH_POSTGRES_URL (the benchmark's default server otherwise)
 * instead of a SQLite file; the two engines' backends then share the
 * machine's cores with them, as in the benchmark's PostgreSQL runs.
 * `--elsewhere`: end to end, each engine's rule creates its follow-ups in
 * another project (BENCH_RULE_ELSEWHERE), so that no new event waits behind
 * the creates in flight (the causal barrier), as under BENCH_RULE nearly all do.
 */
import { parseArgs } from 'node:util';
import { isEntryFile } from '../src/cli/cli-output.js';
import { Cleanup } from './bench-cleanup.js';
import { cpuPerEvent, joinArrivals, type CpuPerEvent } from './bench-closed.js';
import { createPostgresDatabase, createSqliteDatabase, type BenchDatabase } from './bench-databases.js';
import { BENCH_RULE_ELSEWHERE, ENGINE_MAIN, splitArgs, startEngine, writeRules, type BenchEngine, type CpuSplit } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { joinOpenLoop, OPEN_LOOP_SOCKETS } from './bench-e2e.js';
import { startFakeService, type FakeService } from './bench-fake-service.js';
import { closedLoop, openLoop, WebhookPoster } from './bench-load.js';
import { DEFAULT_POSTGRES } from './bench-options.js';
import { BackendCpu } from './bench-pgstats.js';
import { drain } from './bench-systems.js';

export interface PairOptions {
  a: { script: string; nodeArgs: string[] };
  b: { script: string; nodeArgs: string[] };
  rounds: number;
  seconds: number;
  warmUpS: number;
  /** Clients of each engine's closed loop. */
  connections: number;
  intake: boolean;
  /** Each engine sent this many matching webhooks a second (an open loop) instead of its closed loop. */
  openRate?: number;
  /** The PostgreSQL server each engine gets a database on; SQLite files when undefined. */
  postgresUrl?: string;
  /** Each engine's rule creates its follow-ups in another project (BENCH_RULE_ELSEWHERE): no event is held behind them. */
  elsewhere?: boolean;
}

/** One engine's figures in one round. */
export interface SideFigures {
  /** Events acknowledged per second of the round. */
  eventsPerSecond: number;
  /** The main thread's user + system CPU per event handled, drain included (µs). */
  mainCpuUs: number;
  /** The main thread's share of a core over the round and its drain. */
  mainBusy: number;
  /** PostgreSQL: its database's backends' CPU per event handled, drain included (µs). */
  backendCpuUs?: number;
  handled: number;
  /** End to end: webhook sent to its action's arrival at the fake service, over the round's events (ms). */
  latency?: { p50: number; p99: number };
}

export interface PairRound {
  a: SideFigures;
  b: SideFigures;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

/** The median of some figures (of an even count, the mean of the middle two) and their range. */
export function spreadOf(values: readonly number[]): Spread {
  if (values.length === 0) throw new Error('no figure to sum up');
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1] };
}

/** B over A in each round, summed up over the rounds: events per second, main-thread CPU per event, and (end to end) p50 and p99. */
export function pairSummary(rounds: PairRound[]): { eventsPerSecond: Spread; mainCpu: Spread; withBackends?: Spread; p50?: Spread; p99?: Spread } {
  if (rounds.length === 0) throw new Error('no round to sum up');
  const both = rounds.map(withBackends);
  const summary = {
    eventsPerSecond: spreadOf(rounds.map((r) => r.b.eventsPerSecond / r.a.eventsPerSecond)),
    mainCpu: spreadOf(rounds.map((r) => r.b.mainCpuUs / r.a.mainCpuUs)),
    ...(both.every((x) => x !== undefined) ? { withBackends: spreadOf(both as number[]) } : {}),
  };
  if (!rounds.every((r) => r.a.latency && r.b.latency)) return summary;
  return {
    ...summary,
    p50: spreadOf(rounds.map((r) => r.b.latency!.p50 / r.a.latency!.p50)),
    p99: spreadOf(rounds.map((r) => r.b.latency!.p99 / r.a.latency!.p99)),
  };
}

const count = (n: number) => Math.round(n).toLocaleString('en-US');
const ratio = (x: number) => `${x.toFixed(3)}×`;
const ms = (x: number) => (x < 10 ? x.toFixed(1) : count(x));
const latency = (f: SideFigures) => (f.latency ? `, p50 / p99 ${ms(f.latency.p50)} / ${ms(f.latency.p99)} ms` : '');
const backend = (f: SideFigures) => (f.backendCpuUs === undefined ? '' : `, backends ${count(f.backendCpuUs)} µs an event`);
const side = (f: SideFigures) => `${count(f.eventsPerSecond)} events/s, ${count(f.mainCpuUs)} µs of main thread an event (${Math.round(f.mainBusy * 100)} % of a core)${backend(f)}${latency(f)}`;
/** Main thread and backends together, where both sides have their backends' figure. */
const withBackends = (r: PairRound) => (r.a.backendCpuUs === undefined || r.b.backendCpuUs === undefined ? undefined
  : (r.b.mainCpuUs + r.b.backendCpuUs) / (r.a.mainCpuUs + r.a.backendCpuUs));

export function roundLine(n: number, r: PairRound): string {
  const p50 = r.a.latency && r.b.latency ? `, ${ratio(r.b.latency.p50 / r.a.latency.p50)} p50` : '';
  const both = withBackends(r);
  const backends = both === undefined ? '' : `, ${ratio(both)} CPU an event with the backends`;
  return `round ${n}: A ${side(r.a)} | B ${side(r.b)} | B/A ${ratio(r.b.eventsPerSecond / r.a.eventsPerSecond)} events/s, ${ratio(r.b.mainCpuUs / r.a.mainCpuUs)} CPU an event${backends}${p50}`;
}

export function summaryLine(rounds: PairRound[]): string {
  const s = pairSummary(rounds);
  const range = (x: Spread) => `${ratio(x.median)} (${x.min.toFixed(3)}–${ratio(x.max)})`;
  const p50 = s.p50 && s.p99 ? `, webhook-to-action p50 ${range(s.p50)}, p99 ${range(s.p99)}` : '';
  const backends = s.withBackends ? `, with the backends ${range(s.withBackends)}` : '';
  return `B against A over ${rounds.length} round(s), median (range): events/s ${range(s.eventsPerSecond)}, main-thread CPU an event ${range(s.mainCpu)}${backends}${p50}`;
}

interface Side {
  engine: BenchEngine;
  fake: FakeService;
  db: BenchDatabase;
  /** The closed loop's `connections` kept-alive sockets, or an open loop's sockets enough that a webhook never waits for one. */
  poster: WebhookPoster;
}

async function startSide(variant: PairOptions['a'], options: PairOptions, cleanup: Cleanup): Promise<Side> {
  const { connections, postgresUrl } = options;
  const db = postgresUrl === undefined ? createSqliteDatabase(cleanup) : await createPostgresDatabase(postgresUrl, cleanup);
  const fake = await startFakeService(cleanup);
  const rulesDir = options.elsewhere ? writeRules(cleanup, [BENCH_RULE_ELSEWHERE]) : undefined;
  const engine = await startEngine({ layout: 'child', databaseUrl: db.url, serviceUrl: fake.url, script: variant.script, nodeArgs: variant.nodeArgs, rulesDir }, cleanup);
  const poster = options.openRate === undefined ? new WebhookPoster(engine.url, connections, 'keep-alive') : new WebhookPoster(engine.url, OPEN_LOOP_SOCKETS);
  cleanup.add('close the load generator\'s connections', () => poster.close());
  return { engine, fake, db, poster };
}

/**
 * After a round, one engine (`i`: 0 is A): waits until `left` says it has done all it acknowledged (30 s at most),
 * then its main thread's CPU per event `handled` since `start`.
 */
async function settle(i: number, engine: BenchEngine, start: CpuSplit, began: number, left: () => number | Promise<number>, handled: () => number): Promise<CpuPerEvent> {
  const name = i === 0 ? 'A' : 'B';
  const notDone = await drain(left, 30_000, 20);
  if (notDone > 0) throw new Error(`engine ${name} left ${notDone} events undone 30 s after the round`);
  const cpu = cpuPerEvent(start, engine.cpuSplit!(), handled(), (performance.now() - began) / 1000);
  if (cpu === undefined) throw new Error(`engine ${name} handled no event in the round`);
  return cpu;
}

/** Both engines sent `openRate` webhooks a second at once for `seconds`, then until each has done what it acknowledged. */
async function openRound(sides: Side[], options: PairOptions, openRate: number, seconds: number, tag: string): Promise<SideFigures[]> {
  const count = Math.max(1, Math.round(openRate * seconds));
  const runs = await Promise.all(sides.map(async (s, i) => {
    const prefix = runPrefix(`pair_${tag}_${i}`);
    return { events: signedEvents('matching', prefix, count), arrivals: await s.fake.beginRun(prefix, count) };
  }));
  const backends = await Promise.all(sides.map((s) => backendCpu(s, options)));
  const start: CpuSplit[] = sides.map((s) => s.engine.cpuSplit!());
  const began = performance.now();
  const sent = await Promise.all(sides.map((s, i) => openLoop(s.poster, runs[i].events, openRate)));
  return Promise.all(sides.map(async (s, i) => {
    const acknowledged = sent[i].statuses['202'] ?? 0;
    const arrived = () => runs[i].arrivals.arrived();
    const cpu = await settle(i, s.engine, start[i], began, () => acknowledged - arrived(), arrived);
    const joined = joinOpenLoop(sent[i], runs[i].arrivals, count);
    const figures: SideFigures = {
      eventsPerSecond: joined.deliveredPerSecond, mainCpuUs: cpu.mainUserUs + cpu.mainSystemUs, mainBusy: cpu.mainBusy, handled: joined.delivered,
      latency: { p50: joined.latencyMs.p50, p99: joined.latencyMs.p99 },
    };
    return withBackendCpu(figures, await backends[i]?.stop());
  }));
}

/** The figures with their backends' CPU per event handled, when there is one. */
function withBackendCpu(figures: SideFigures, backendSeconds: number | undefined): SideFigures {
  if (backendSeconds !== undefined && figures.handled > 0) figures.backendCpuUs = (backendSeconds * 1e6) / figures.handled;
  return figures;
}

/** PostgreSQL: the CPU of the side's backends from now on (bench-pgstats.ts); SQLite has none. */
async function backendCpu(side: Side, options: PairOptions): Promise<BackendCpu | undefined> {
  if (options.postgresUrl === undefined) return undefined;
  const cpu = new BackendCpu(options.postgresUrl, side.db.where);
  await cpu.start();
  return cpu;
}

/** Both engines under their closed loops at once for `seconds`, then until each has done what it acknowledged. */
async function round(sides: Side[], options: PairOptions, seconds: number, tag: string, first: 0 | 1): Promise<SideFigures[]> {
  const perSide = Math.ceil(12_000 * seconds);
  const runs = await Promise.all(sides.map(async (s, i) => {
    const prefix = runPrefix(`pair_${tag}_${i}`);
    const events = signedEvents(options.intake ? 'unmatched' : 'matching', prefix, perSide);
    return { events, arrivals: await s.fake.beginRun(prefix, perSide) };
  }));
  const backends = await Promise.all(sides.map((s) => backendCpu(s, options)));
  const start: CpuSplit[] = sides.map((s) => s.engine.cpuSplit!());
  const began = performance.now();
  // Whose clients send first alternates from round to round, so that neither engine is always the first served.
  const order = first === 0 ? [0, 1] : [1, 0];
  const loops = order.map((i) => closedLoop(sides[i].poster, runs[i].events, options.connections, seconds * 1000));
  const inOrder = await Promise.all(loops);
  const results = order[0] === 0 ? inOrder : [inOrder[1], inOrder[0]];
  return Promise.all(sides.map(async (s, i) => {
    const acknowledged = results[i].statuses['202'] ?? 0;
    const left = options.intake ? () => s.db.waiting() : () => acknowledged - runs[i].arrivals.arrived();
    const handled = () => (options.intake ? acknowledged : runs[i].arrivals.arrived());
    const cpu = await settle(i, s.engine, start[i], began, left, handled);
    const figures: SideFigures = { eventsPerSecond: acknowledged / results[i].seconds, mainCpuUs: cpu.mainUserUs + cpu.mainSystemUs, mainBusy: cpu.mainBusy, handled: handled() };
    if (!options.intake) {
      const { p50, p99 } = joinArrivals(results[i], runs[i].arrivals.arrivals, Infinity).latencyMs;
      figures.latency = { p50, p99 };
    }
    return withBackendCpu(figures, await backends[i]?.stop());
  }));
}

export async function runPair(options: PairOptions, cleanup: Cleanup, say: (line: string) => void): Promise<PairRound[]> {
  const sides = [await startSide(options.a, options, cleanup), await startSide(options.b, options, cleanup)];
  // On PostgreSQL each side's database is named (it is dropped when the run ends).
  const where = (s: Side) => (s.db.name === 'postgres' ? ` (PostgreSQL database ${s.db.where})` : '');
  say(`A: ${options.a.script} ${options.a.nodeArgs.join(' ')}`.trimEnd() + where(sides[0]));
  say(`B: ${options.b.script} ${options.b.nodeArgs.join(' ')}`.trimEnd() + where(sides[1]));
  const on = options.postgresUrl === undefined ? 'SQLite' : 'PostgreSQL';
  const { openRate } = options;
  const load = openRate === undefined
    ? `${options.intake ? 'intake (no event matches)' : `end to end (every event matches${options.elsewhere ? ', its follow-up created in another project' : ''})`} on ${on}, ${options.connections} keep-alive clients each`
    : `open loop, end to end (every event matches) on ${on}, ${openRate.toLocaleString('en-US')} webhooks a second each`;
  say(`${load}; warming up for ${options.warmUpS} s …`);
  const once = (seconds: number, tag: string, first: 0 | 1) => (openRate === undefined ? round(sides, options, seconds, tag, first) : openRound(sides, options, openRate, seconds, tag));
  if (options.warmUpS > 0) await once(options.warmUpS, 'warm', 0);
  const rounds: PairRound[] = [];
  for (let n = 1; n <= options.rounds; n++) {
    const [a, b] = await once(options.seconds, String(n), n % 2 === 1 ? 0 : 1);
    rounds.push({ a, b });
    say(roundLine(n, { a, b }));
  }
  say(summaryLine(rounds));
  return rounds;
}

/** `text` as a whole number of at least `least`, or an error naming the option (`what`) and what was given. */
export function whole(text: string, what: string, least: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < least) throw new Error(`${what} must be a whole number ≥ ${least}, not ${JSON.stringify(text)}`);
  return n;
}

export function pairOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): PairOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      a: { type: 'string', default: ENGINE_MAIN }, b: { type: 'string', default: ENGINE_MAIN },
      'a-args': { type: 'string', default: '' }, 'b-args': { type: 'string', default: '' },
      rounds: { type: 'string', default: '5' }, seconds: { type: 'string', default: '10' }, warmup: { type: 'string', default: '10' },
      connections: { type: 'string', default: '16' }, intake: { type: 'boolean', default: false },
      postgres: { type: 'boolean', default: false }, 'open-rate': { type: 'string' }, elsewhere: { type: 'boolean', default: false },
    },
  });
  const openRate = values['open-rate'] === undefined ? undefined : whole(values['open-rate'], '--open-rate', 1);
  if (openRate !== undefined && values.intake) throw new Error('--open-rate sends matching webhooks end to end: it cannot be given with --intake');
  if (values.elsewhere && values.intake) throw new Error('--elsewhere is about the end-to-end run; --intake matches no event');
  return {
    a: { script: values.a!, nodeArgs: splitArgs(values['a-args']) },
    b: { script: values.b!, nodeArgs: splitArgs(values['b-args']) },
    rounds: whole(values.rounds!, '--rounds', 1),
    seconds: whole(values.seconds!, '--seconds', 1),
    warmUpS: whole(values.warmup!, '--warmup', 0),
    connections: whole(values.connections!, '--connections', 1),
    intake: values.intake!,
    openRate,
    postgresUrl: values.postgres ? (env.BENCH_POSTGRES_URL ?? DEFAULT_POSTGRES) : undefined,
    elsewhere: values.elsewhere!,
  };
}

async function main(): Promise<void> {
  const options = pairOptions(process.argv.slice(2));
  const cleanup = new Cleanup();
  process.once('SIGINT', () => cleanup.interrupt());
  try {
    await runPair(options, cleanup, (line) => process.stdout.write(`${line}\n`));
  } finally {
    await cleanup.runAll((line) => process.stderr.write(`${line}\n`));
  }
}

if (isEntryFile(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`bench:pair: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
