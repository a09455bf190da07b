/**
 * `npm run bench` (SPEC 10): the engine beside a minimal reference server
 * (reference-server.ts) under the same load in the same run: closed loops
 * end to end and intake only, open loops at half the reference's rate (and,
 * on SQLite, a quarter of it), the drain rate with a backlog waiting, start-up
 * with many rule files, memory and claim time with many executions waiting on
 * a delay, and rule matching; printed with the fast-path targets met or not,
 * and written to bench/results/latest.json. See bench/README.md for the method.
 *
 * Each measured run gets a fresh process and a fresh database, so one run's
 * backlog never slows the next. Whatever happens (a failure, Ctrl-C), the
 * processes, temp folders and databases it made are removed before it exits.
 * The exit status is 1 only when some part could not run; a target not met
 * is a figure, not a failure.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchmarkMatching } from './bench-matching.js';
import { colors, isEntryFile, processContext, type CliContext } from '../src/cli/cli-output.js';
import { runBacklog } from './bench-backlog.js';
import { runReplicaCounts } from './bench-replicas.js';
import { Cleanup } from './bench-cleanup.js';
import { runClosedLoop, type ClosedLoopFigures, type LoadKind } from './bench-closed.js';
import { runInterleaved, withDatabases } from './bench-interleaved.js';
import { createPostgresDatabase, createSqliteDatabase, postgresAnswers, type BenchDatabase, type DatabaseName } from './bench-databases.js';
import { runOpenLoop, type OpenLoopRateFrom } from './bench-e2e.js';
import { startFakeService } from './bench-fake-service.js';
import type { ConnectionMode } from './bench-load.js';
import { BenchUsageError, parseBenchOptions, SUSTAINED_OPEN_LOOP_S, USAGE, type BenchOptions } from './bench-options.js';
import { finishResults, summaryLines, writeResults } from './bench-report.js';
import { emptyResults, type BenchResults } from './bench-results.js';
import { runStartup } from './bench-startup.js';
import { runWaiting } from './bench-waiting.js';
import { databaseFor, type ScenarioContext, type SystemName } from './bench-systems.js';
import { referenceOf } from './bench-tables.js';

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The databases to measure on: SQLite always, PostgreSQL when configured and answering. */
async function databaseNames(options: BenchOptions, results: BenchResults): Promise<DatabaseName[]> {
  if (options.postgresDisabled || options.postgresUrl === undefined) return ['sqlite'];
  const problem = await postgresAnswers(options.postgresUrl);
  if (problem === undefined) return ['sqlite', 'postgres'];
  const where = new URL(options.postgresUrl).host;
  if (options.postgresRequired) results.errors.push({ part: 'PostgreSQL runs', message: `BENCH_POSTGRES_URL (${where}) does not answer: ${problem}` });
  else results.skipped.push(`PostgreSQL: no server answers at ${where} (set BENCH_POSTGRES_URL to use another)`);
  return ['sqlite'];
}

/** One fresh database for one measured run, dropped afterwards whatever happens. */
async function withDatabase<T>(name: DatabaseName, options: BenchOptions, cleanup: Cleanup, work: (db: BenchDatabase) => Promise<T>): Promise<T> {
  if (cleanup.wasInterrupted) throw new Error('interrupted');
  const db = name === 'sqlite' ? createSqliteDatabase(cleanup) : await createPostgresDatabase(options.postgresUrl!, cleanup);
  try {
    return await work(db);
  } finally {
    await db.drop();
  }
}

/** Runs one part; a failure is recorded and the remaining parts still run. */
async function attempt(part: string, results: BenchResults, ctx: CliContext, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    ctx.stderr(`bench: ${part} failed: ${message(error)}`);
    results.errors.push({ part, message: message(error) });
  }
}

function profileFolder(options: BenchOptions, ctx: CliContext): string | undefined {
  if (!options.profile) return undefined;
  if (options.layout !== 'child') {
    ctx.stderr('bench: --profile needs the child layout (it profiles the engine process); ignored');
    return undefined;
  }
  // Kept on purpose (not cleaned up): the profiles are what was asked for.
  const dir = mkdtempSync(join(tmpdir(), 'engine-bench-profile-'));
  ctx.stderr(`bench: engine CPU profiles (.cpuprofile, open in Chrome DevTools) go to ${dir}/<part>-<database>/`);
  return dir;
}

async function closedLoops(ctx: ScenarioContext, systems: SystemName[], kind: LoadKind, modes: ConnectionMode[], results: BenchResults, cli: CliContext): Promise<void> {
  const part = (system: SystemName, mode: ConnectionMode) => `closed loop ${kind} (${mode}) on ${system}`;
  // Taken in turns (bench-interleaved.ts) unless asked otherwise; the flow engine always alone.
  const together: SystemName[] = ctx.options.slices > 1 ? systems.filter((s) => s !== 'flow') : [];
  for (const mode of modes) {
    const found: ClosedLoopFigures[] = [];
    if (together.length > 0) {
      await attempt(`closed loop ${kind} (${mode}) in turns`, results, cli, () =>
        withDatabases(ctx, together.map(databaseFor), async (databases) => {
          const failed = (system: SystemName, error: unknown) => {
            cli.stderr(`bench: ${part(system, mode)} failed: ${message(error)}`);
            results.errors.push({ part: part(system, mode), message: message(error) });
          };
          found.push(...await runInterleaved(ctx, together, kind, mode, databases, failed));
        }));
    }
    for (const system of systems.filter((s) => !together.includes(s))) {
      await attempt(part(system, mode), results, cli, () =>
        ctx.withDatabase(databaseFor(system), async (db) => void found.push(await runClosedLoop(ctx, system, kind, mode, db))));
    }
    // In the order the systems were named, whichever way they ran.
    results.closedLoop.push(...systems.flatMap((system) => found.filter((f) => f.system === system)));
  }
}

/** Half the reference's closed-loop end-to-end rate of this run (measured now if it was not), or the rate given. */
async function openLoopRate(ctx: ScenarioContext, results: BenchResults, cli: CliContext) {
  if (ctx.options.openRate !== undefined) return { rate: ctx.options.openRate, from: 'fixed' as const };
  if (!referenceOf(results.closedLoop, 'e2e', 'keep-alive')) await closedLoops(ctx, ['reference'], 'e2e', ['keep-alive'], results, cli);
  const reference = referenceOf(results.closedLoop, 'e2e', 'keep-alive');
  return reference ? { rate: reference.eventsPerSecond / 2, from: 'half the reference' as const } : undefined;
}

async function openLoops(ctx: ScenarioContext, systems: SystemName[], results: BenchResults, cli: CliContext): Promise<void> {
  const rate = await openLoopRate(ctx, results, cli);
  if (rate === undefined) return void results.skipped.push('open loop: the reference server\'s rate could not be measured');
  const loops: Array<{ system: SystemName; rate: number; from: OpenLoopRateFrom; seconds?: number }> = systems.map((system) => ({ system, rate: rate.rate, from: rate.from }));
  // Half the rate the end-to-end target asks of the engine (0.5 × the reference), on the target's database; then the
  // target's half rate sent for longer (bench-e2e.ts). Neither in a quick run, which keeps under a minute.
  if (rate.from === 'half the reference' && systems.includes('sqlite') && !ctx.options.quick) {
    loops.push({ system: 'sqlite', rate: rate.rate / 2, from: 'a quarter of the reference' });
    if (ctx.options.openDurationS < SUSTAINED_OPEN_LOOP_S) loops.push({ system: 'sqlite', rate: rate.rate, from: rate.from, seconds: SUSTAINED_OPEN_LOOP_S });
  }
  for (const loop of loops) {
    const what = `open loop on ${loop.system} at ${loop.from}${loop.seconds === undefined ? '' : ` for ${loop.seconds} s`}`;
    await attempt(what, results, cli, () =>
      ctx.withDatabase(databaseFor(loop.system), async (db) => void results.openLoop.push(await runOpenLoop(ctx, loop.system, db, loop.rate, loop.from, loop.seconds))));
  }
}

async function engineParts(options: BenchOptions, cleanup: Cleanup, cli: CliContext, results: BenchResults): Promise<void> {
  const fake = await startFakeService(cleanup);
  const started = performance.now();
  const progress = (line: string) => cli.stderr(`[${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}`);
  const ctx: ScenarioContext = {
    options, cleanup, fake, progress, profileDir: profileFolder(options, cli),
    withDatabase: (name, work) => withDatabase(name, options, cleanup, work),
  };
  const databases = await databaseNames(options, results);
  const systems: SystemName[] = ['reference', 'flow', ...databases];
  const wants = (section: BenchOptions['sections'][number]) => options.sections.includes(section);
  if (wants('e2e')) await closedLoops(ctx, systems, 'e2e', options.connectionModes, results, cli);
  // A quick run, which keeps under a minute, compares the flow engine end to end only.
  if (wants('intake')) await closedLoops(ctx, options.quick ? systems.filter((s) => s !== 'flow') : systems, 'intake', options.connectionModes, results, cli);
  // The target is SQLite's; the reference's and PostgreSQL's open loops are for comparison only: a quick run skips them
  // (PostgreSQL, which falls behind at that rate, then spent more of a quick run catching up than any other part).
  if (wants('open')) await openLoops(ctx, options.quick ? databases.filter((name) => name === 'sqlite') : systems, results, cli);
  for (const name of wants('backlog') ? databases : []) {
    await attempt(`backlog on ${name}`, results, cli, async () => void results.backlog.push(await runBacklog(ctx, name)));
  }
  for (const rules of wants('startup') ? (options.quick ? [options.startupRules] : [options.startupRules, 1]) : []) {
    await attempt(`start-up with ${rules} rule files`, results, cli, async () => void results.startup.push(await runStartup(ctx, rules)));
  }
  // A quick run measures waiting executions on the first database only (SQLite): each database's part starts the
  // engine three times, and both kept `--quick` over a minute.
  for (const name of wants('waiting') ? (options.quick ? databases.slice(0, 1) : databases) : []) {
    await attempt(`waiting executions on ${name}`, results, cli, async () => void results.waiting.push(await runWaiting(ctx, name)));
  }
  if (options.replicas !== undefined && !databases.includes('postgres')) results.skipped.push('replicas: they need PostgreSQL');
  else if (options.replicas !== undefined) {
    await attempt('replicas', results, cli, async () => void (results.replicas = await runReplicaCounts(ctx, options.replicas!, (count, error) => {
      cli.stderr(`bench: ${count} replica(s) failed: ${message(error)}`);
      results.errors.push({ part: `${count} replica(s)`, message: message(error) });
    })));
  }
}

async function matchingPart(options: BenchOptions, ctx: CliContext, results: BenchResults): Promise<void> {
  // Discarded: the first call pays for compiling the evaluator's code paths, which would count against 10 rules only.
  await attempt('matching warm-up', results, ctx, async () => void (await benchmarkMatching(10, 2_000)));
  for (const count of options.matchingRuleCounts) {
    ctx.stderr(`matching: ${count.toLocaleString('en-US')} rules, ${options.matchingEvents.toLocaleString('en-US')} events …`);
    await attempt(`matching with ${count} rules`, results, ctx, async () => {
      results.matching.push(await benchmarkMatching(count, options.matchingEvents));
    });
  }
}

/**
 * Ctrl-C, SIGTERM or a crash (e.g. EPIPE when the output is piped into `head`):
 * undo everything, then leave with the conventional status.
 */
function onInterrupt(cleanup: Cleanup, ctx: CliContext): () => void {
  const abort = (why: string, status: number) => {
    try {
      ctx.stderr(`bench: ${why}, cleaning up`);
    } catch {
      // The stream may be the thing that broke; cleaning up matters more.
    }
    cleanup.interrupt();
    void cleanup.runAll(() => undefined).finally(() => process.exit(status));
  };
  const onSignal = (signal: NodeJS.Signals) => abort(`${signal} received`, signal === 'SIGINT' ? 130 : 143);
  const onCrash = (error: unknown) => abort(`crashed: ${message(error)}`, 1);
  const lastResort = () => cleanup.killChildrenNow();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('uncaughtException', onCrash);
  process.once('unhandledRejection', onCrash);
  process.once('exit', lastResort);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    process.off('exit', lastResort);
  };
}

/** Runs the parts asked for; undefined when interrupted. */
async function measure(options: BenchOptions, ctx: CliContext): Promise<BenchResults | undefined> {
  const results = emptyResults(options);
  const cleanup = new Cleanup();
  const detach = onInterrupt(cleanup, ctx);
  try {
    if (options.sections.some((s) => s !== 'matching') || options.replicas !== undefined) {
      await attempt('the engine benchmarks', results, ctx, () => engineParts(options, cleanup, ctx, results));
    }
    await cleanup.runAll(ctx.stderr);
    if (options.sections.includes('matching') && !cleanup.wasInterrupted) await matchingPart(options, ctx, results);
  } finally {
    await cleanup.runAll(ctx.stderr);
    detach();
  }
  return cleanup.wasInterrupted ? undefined : results;
}

export async function bench(argv: readonly string[], ctx: CliContext): Promise<number> {
  let options;
  try {
    options = parseBenchOptions(argv, ctx.env);
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error;
    ctx.stderr(`bench: ${error.message}\n${USAGE}`);
    return 2;
  }
  if (options === 'help') {
    ctx.stdout(USAGE);
    return 0;
  }
  const results = await measure(options, ctx);
  // Interrupted: the figures are incomplete, and the interrupt handler exits once everything is undone.
  if (results === undefined) return 1;
  finishResults(results);
  ctx.stdout('');
  for (const line of summaryLines(results, colors(ctx.color))) ctx.stdout(line);
  writeResults(options.resultsFile, results);
  ctx.stdout(`\nfigures written to ${options.resultsFile}`);
  return results.errors.length > 0 ? 1 : 0;
}

if (isEntryFile(import.meta.url)) {
  process.exitCode = await bench(process.argv.slice(2), processContext());
}
