/**
 * `npm run bench:instructions`: the CPU cost of an event counted in machine
 * instructions (valgrind's callgrind), the reference server beside the
 * engine on SQLite, end to end (every event matches; its action reaches the
 * fake service), or with `--intake` as intake only (no event matches: the
 * rule is evaluated and fails; counted until every event is acknowledged and
 * none is left waiting for its evaluation).
 *
 * Why: the closed loops of `npm run bench` measure events per second, which on
 * a shared 2-core machine moves ±15 % from run to run with the same code, so a
 * change worth 3–5 % cannot be told from noise with a few runs. Instructions
 * do not depend on what else the machine is doing: two runs of the same code
 * agree within about 1 %. They are not time (a cache miss or a system call's
 * wait costs none, and the fsync of a commit is the kernel's), so they answer
 * "does this change make the engine do less work per event?", and the
 * closed loops still answer "is it faster?".
 *
 * How: each system runs under `valgrind --tool=callgrind` with instrumentation
 * off while it starts and takes `--warmup` events (3,000: V8 has compiled the
 * hot path by then), then on (`callgrind_control -i on`) for `--events` more,
 * sent by 32 keep-alive connections as fast as they are answered, until the
 * last one's action has arrived; then off again, and the counters are dumped.
 * Under valgrind the system runs about a hundred times slower than natively,
 * so every batch is as full as the 32 connections make it: the figures are
 * those of a loaded engine, not of one that receives an event now and then.
 * Reported per event: all threads' instructions and the main thread's (the
 * one thread the engine's throughput depends on; the others are V8's
 * compilers and garbage collector and libuv's pool).
 *
 *   npm run bench:instructions [-- --events N] [--warmup N] [--bundle FILE] [--only engine|reference] [--intake] [--keep] [--functions N] [--elsewhere] [--postgres]
 *
 * `--bundle` measures another build of the engine in place of the current
 * one: a copy of dist-bench/bundle/main.js made before a change, put two
 * folders below the repository (bench/results/before.js), where it finds its
 * packages and the rule schema. `--keep` keeps callgrind's files (one per thread; the main
 * thread's ends in `-01`) for `callgrind_annotate`, which names the native
 * functions (SQLite, V8's runtime, libc); JavaScript compiled by V8 shows as
 * unnamed addresses. `--functions N` names those too (node's
 * `--perf-basic-prof` map, bench-functions.ts) and prints the main thread's
 * top N functions, self and inclusive. `--elsewhere` loads the engine's rule
 * with its follow-ups created in another project (BENCH_RULE_ELSEWHERE), so
 * that no event waits behind the creates in flight in its own. `--postgres`
 * runs the engine on PostgreSQL instead (BENCH_POSTGRES_URL, by default the
 * local server's `test`; a database of its own, dropped after), and reports
 * beside its instructions the CPU time its backends used per counted event:
 * time, not instructions (the server runs outside valgrind), but taken while
 * the machine is nearly idle (the engine under valgrind sends slowly), so
 * steadier than the closed loops' figures. About two minutes per system for
 * the defaults.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { isEntryFile } from '../src/cli/cli-output.js';
import { engineEnv } from '../test/support/engine.js';
import { freePort } from '../test/support/ports.js';
import { waitUntil } from '../test/support/wait.js';
import { Cleanup } from './bench-cleanup.js';
import { BENCH_RULE, BENCH_RULE_ELSEWHERE, benchEnv, ENGINE_MAIN, REFERENCE_MAIN, referenceEnv, writeRules } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { startFakeService, type FakeService } from './bench-fake-service.js';
import { closedLoop, WebhookPoster } from './bench-load.js';
import { createPostgresDatabase } from './bench-databases.js';
import { DEFAULT_POSTGRES } from './bench-options.js';
import { functionsReport } from './bench-functions.js';
import { BackendCpu } from './bench-pgstats.js';
import { engineNodeOptions } from '../src/config/heap-growth.js';

// better-sqlite3 ships no types here; this is the little of it the count of waiting events uses.
const SqliteDatabase = createRequire(import.meta.url)('better-sqlite3') as new (file: string, options: { readonly: boolean }) => {
  prepare(sql: string): { get(): unknown };
  close(): void;
};

const CONNECTIONS = 32;
/** valgrind names its control pipes after USER and HOST (the engine's HOST is the address it listens on). */
const VALGRIND_ENV = { USER: process.env.USER || 'bench', HOST: '127.0.0.1' };

interface Measured {
  script: string;
  /** node's own arguments, before the script. */
  nodeArgs?: string[];
  env: Record<string, string | undefined>;
  readyPath: string;
  /** Intake only: events received and not yet evaluated (none on the reference, which evaluates nothing after). */
  waiting?: () => number | Promise<number>;
  /** PostgreSQL: the database's backends, whose CPU the counted run measures too. */
  backends?: () => BackendCpu;
}

/** callgrind's output: one file per thread (`--separate-threads=yes`), `<file>.<dump>-<thread>`, each ending with `totals: N`. */
export function countsOf(folder: string, base: string): { total: number; mainThread: number } {
  let total = 0;
  let mainThread = 0;
  for (const name of readdirSync(folder).filter((f) => f.startsWith(`${base}.`))) {
    const totals = /^totals:\s*(\d+)/m.exec(readFileSync(join(folder, name), 'utf8'));
    if (!totals) continue;
    total += Number(totals[1]);
    if (name.endsWith('-01')) mainThread += Number(totals[1]);
  }
  if (total === 0) throw new Error(`callgrind wrote no counts to ${folder}/${base}.*`);
  return { total, mainThread };
}

function control(child: ChildProcess, command: string[]): void {
  execFileSync('callgrind_control', [...command, String(child.pid)], { env: { ...process.env, ...VALGRIND_ENV }, stdio: 'ignore' });
}

interface Options {
  events: number;
  warmup: number;
  bundle: string;
  only?: string;
  /** Keep callgrind's files (their folder is reported) instead of removing them. */
  keep?: boolean;
  /** Intake only: events no rule matches, instead of end to end. */
  intake?: boolean;
  /** Name the main thread's top functions, this many (bench-functions.ts). */
  functions?: number;
  /** The engine's rule creates its follow-ups in another project (BENCH_RULE_ELSEWHERE): no event is held. */
  elsewhere?: boolean;
  /** The engine on this PostgreSQL server (a database of its own) instead of SQLite. */
  postgres?: string;
}

export interface InstructionCount {
  system: 'reference' | 'engine';
  events: number;
  /** Per event, every thread of the process. */
  total: number;
  /** Per event, the main thread (the event loop). */
  mainThread: number;
  /** Where callgrind's files are, when kept. */
  kept?: string;
  /** The main thread's top functions (`--functions`). */
  functions?: string[];
  /** On PostgreSQL: CPU time of the engine's backends per counted event, µs. */
  backendMicroseconds?: number;
}

/** The system started under callgrind, counting off, once it answers `readyPath`. */
async function startUnderValgrind(system: string, spec: Measured, folder: string, cleanup: Cleanup) {
  const port = await freePort();
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${join(folder, 'counts')}`, process.execPath, ...(spec.nodeArgs ?? []), spec.script],
    { env: { ...process.env, ...spec.env, ...VALGRIND_ENV, PORT: String(port) } as NodeJS.ProcessEnv, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  cleanup.trackChild(child);
  let failedToStart: Error | undefined;
  child.once('error', (error: NodeJS.ErrnoException) => {
    failedToStart = error.code === 'ENOENT' ? new Error('valgrind is not installed (Debian: apt-get install -y valgrind)') : error;
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const stop = cleanup.add(`stop ${system} under valgrind (pid ${child.pid})`, () => void child.kill('SIGKILL'));
  const url = `http://127.0.0.1:${port}`;
  const exited = () => failedToStart !== undefined || child.exitCode !== null || child.signalCode !== null;
  await waitUntil(async () => exited() || (await fetch(`${url}${spec.readyPath}`).then((r) => r.ok, () => false)), {
    timeoutMs: 300_000, intervalMs: 500, what: `${system} under valgrind to answer ${spec.readyPath}`,
  });
  if (failedToStart) throw failedToStart;
  if (exited()) throw new Error(`${system} under valgrind exited (${child.exitCode ?? child.signalCode}):\n${stderr}`);
  return { child, url, stop };
}

async function measure(system: InstructionCount['system'], measured: Measured, fake: FakeService, { events, warmup, keep, intake, functions }: Options, cleanup: Cleanup): Promise<InstructionCount> {
  const folder = mkdtempSync(join(tmpdir(), 'bench-instructions-'));
  if (!keep) cleanup.add(`remove ${folder}`, () => rmSync(folder, { recursive: true, force: true }));
  // V8 writes the map as it compiles, to /tmp/perf-<pid>.map (pid: node's, which valgrind runs in its own process).
  const spec = functions ? { ...measured, nodeArgs: [...(measured.nodeArgs ?? []), '--perf-basic-prof'] } : measured;
  const { child, url, stop } = await startUnderValgrind(system, spec, folder, cleanup);
  const perfMap = `/tmp/perf-${child.pid}.map`;
  // Kept with callgrind's files when those are (as perf.map beside them), for a closer look; removed otherwise.
  if (functions) cleanup.add(keep ? `move ${perfMap} to ${folder}` : `remove ${perfMap}`, () => (keep ? renameSync(perfMap, join(folder, 'perf.map')) : rmSync(perfMap, { force: true })));
  const poster = new WebhookPoster(url, CONNECTIONS);
  const run = async (what: string, count: number, during?: () => void) => {
    const prefix = runPrefix(what);
    const arrivals = await fake.beginRun(prefix, count);
    during?.();
    const sent = await closedLoop(poster, signedEvents(intake ? 'unmatched' : 'matching', prefix, count), CONNECTIONS, Number.MAX_SAFE_INTEGER);
    if ((sent.statuses[202] ?? 0) !== count) throw new Error(`${system}: ${what} answered ${JSON.stringify(sent.statuses)} to ${count} webhooks`);
    if (intake) await waitUntil(async () => ((await spec.waiting?.()) ?? 0) === 0, { timeoutMs: 600_000, intervalMs: 50, what: `${system}: the ${what} run's events evaluated` });
    else await waitUntil(() => arrivals.arrived() >= count, { timeoutMs: 600_000, intervalMs: 50, what: `${system}: ${count} actions of the ${what} run` });
  };
  await run('warmup', warmup);
  const backends = spec.backends?.();
  await backends?.start();
  await run('counted', events, () => control(child, ['-i', 'on']));
  control(child, ['-i', 'off']);
  const backendSeconds = await backends?.stop();
  control(child, ['-d']);
  poster.close();
  await stop();
  const { total, mainThread } = countsOf(folder, 'counts');
  const mainFile = readdirSync(folder).find((name) => name.startsWith('counts.') && name.endsWith('-01'));
  const named = functions && mainFile ? { functions: functionsReport(join(folder, mainFile), perfMap, spec.script, events, functions) } : {};
  const cpu = backendSeconds === undefined ? {} : { backendMicroseconds: (backendSeconds * 1e6) / events };
  return { system, events, total: total / events, mainThread: mainThread / events, ...(keep ? { kept: folder } : {}), ...named, ...cpu };
}

export async function countInstructions(options: Options, cleanup: Cleanup): Promise<InstructionCount[]> {
  const fake = await startFakeService(cleanup);
  const counts: InstructionCount[] = [];
  if (options.only !== 'engine') {
    const folder = mkdtempSync(join(tmpdir(), 'bench-reference-'));
    cleanup.add(`remove ${folder}`, () => rmSync(folder, { recursive: true, force: true }));
    const env = referenceEnv(join(folder, 'reference.sqlite'), fake.url);
    counts.push(await measure('reference', { script: REFERENCE_MAIN, env, readyPath: '/health' }, fake, options, cleanup));
  }
  if (options.only !== 'reference') {
    const folder = mkdtempSync(join(tmpdir(), 'bench-engine-'));
    cleanup.add(`remove ${folder}`, () => rmSync(folder, { recursive: true, force: true }));
    const file = join(folder, 'engine.sqlite');
    const postgres = options.postgres === undefined ? undefined : await createPostgresDatabase(options.postgres, cleanup);
    const databaseUrl = postgres?.url ?? `sqlite:${file}`;
    const env = engineEnv(benchEnv({ layout: 'child', databaseUrl, serviceUrl: fake.url }, writeRules(cleanup, [options.elsewhere ? BENCH_RULE_ELSEWHERE : BENCH_RULE])));
    const onDatabase = postgres
      ? { waiting: () => postgres.waiting(), backends: () => new BackendCpu(options.postgres!, postgres.where) }
      : { waiting: () => waitingIn(file) };
    // As `npm start` runs it (heap-growth.ts engineNodeOptions).
    counts.push(await measure('engine', { script: options.bundle, env, nodeArgs: [...engineNodeOptions(env.DATABASE_URL)], readyPath: '/health/ready', ...onDatabase }, fake, options, cleanup));
  }
  return counts;
}

/** Events the engine has received and not yet evaluated, read beside it (WAL readers do not block it). */
function waitingIn(file: string): number {
  const db = new SqliteDatabase(file, { readonly: true });
  try {
    return Number((db.prepare("SELECT COUNT(*) AS n FROM events WHERE status = 'received'").get() as { n: number }).n);
  } finally {
    db.close();
  }
}

const millions = (n: number) => `${(n / 1e6).toFixed(3)} M`;

export function report(counts: InstructionCount[], intake = false, elsewhere = false, postgres = false): string[] {
  const reference = counts.find((c) => c.system === 'reference');
  const what = intake ? 'intake, no event matches' : elsewhere ? "end to end, the engine's follow-ups created in another project" : 'end to end';
  const database = postgres ? 'the engine on PostgreSQL, the reference on SQLite' : 'SQLite';
  const lines = [`instructions per event (callgrind; ${what}, ${database}; 32 keep-alive connections):`, '               all threads   main thread'];
  for (const c of counts) {
    const ratio = reference && c !== reference ? `   reference / engine: ${(reference.total / c.total).toFixed(2)}× all, ${(reference.mainThread / c.mainThread).toFixed(2)}× main thread` : '';
    lines.push(`  ${c.system.padEnd(11)} ${millions(c.total).padStart(12)}  ${millions(c.mainThread).padStart(12)}${ratio}`);
    if (c.backendMicroseconds !== undefined) lines.push(`    its PostgreSQL backends: ${c.backendMicroseconds.toFixed(1)} µs of CPU per event (time, not instructions)`);
    if (c.kept) lines.push(`    callgrind's files: ${c.kept}/counts.*`);
  }
  for (const c of counts) if (c.functions) lines.push('', `${c.system}, main thread, by function:`, ...c.functions);
  return lines;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      events: { type: 'string', default: '1000' }, warmup: { type: 'string', default: '3000' }, bundle: { type: 'string', default: ENGINE_MAIN },
      only: { type: 'string' }, keep: { type: 'boolean', default: false }, intake: { type: 'boolean', default: false }, functions: { type: 'string' },
      elsewhere: { type: 'boolean', default: false }, postgres: { type: 'boolean', default: false },
    },
  });
  const functions = values.functions === undefined ? undefined : Number(values.functions);
  if (functions !== undefined && !(Number.isInteger(functions) && functions > 0)) throw new Error('--functions takes how many functions to show, a whole number ≥ 1');
  const events = Number(values.events);
  const warmup = Number(values.warmup);
  if (!Number.isInteger(events) || events < 1 || !Number.isInteger(warmup) || warmup < 0) throw new Error('--events must be a whole number ≥ 1, --warmup ≥ 0');
  if (values.only !== undefined && !['engine', 'reference'].includes(values.only)) throw new Error('--only takes engine or reference');
  if (values.elsewhere && values.intake) throw new Error('--elsewhere is about the end-to-end run; --intake matches no event');
  const cleanup = new Cleanup();
  process.once('SIGINT', () => cleanup.interrupt());
  try {
    const postgres = values.postgres ? (process.env.BENCH_POSTGRES_URL ?? DEFAULT_POSTGRES) : undefined;
    const counts = await countInstructions({ events, warmup, bundle: values.bundle!, only: values.only, keep: values.keep, intake: values.intake, functions, elsewhere: values.elsewhere, postgres }, cleanup);
    for (const line of report(counts, values.intake, values.elsewhere, values.postgres)) process.stdout.write(`${line}\n`);
  } finally {
    await cleanup.runAll((line) => process.stderr.write(`${line}\n`));
  }
}

if (isEntryFile(import.meta.url)) {
  main().catch((error: unknown) => {
    process.stderr.write(`bench:instructions: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
