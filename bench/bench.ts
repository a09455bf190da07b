/**
 * `npm run bench` (SPEC 10): webhook intake, end to end and rule matching,
 * measured on this machine and printed; the figures also go to
 * bench/results/latest.json. See bench/README.md for the method.
 *
 * Each measured run gets a fresh engine and a fresh database, so one run's
 * backlog never slows the next. Whatever happens (a failure, Ctrl-C), the
 * engines, temp folders and databases it made are removed before it exits.
 * The exit status is 1 only when some part could not run; the figures
 * themselves are never judged.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchmarkMatching } from './bench-matching.js';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { colors, isEntryFile, processContext, type CliContext } from '../src/cli/cli-output.js';
import { Cleanup } from './bench-cleanup.js';
import { createPostgresDatabase, createSqliteDatabase, postgresAnswers, type BenchDatabase, type DatabaseName } from './bench-databases.js';
import { runEndToEnd } from './bench-e2e.js';
import { runIntake, type ScenarioContext } from './bench-intake.js';
import { BenchUsageError, parseBenchOptions, USAGE, type BenchOptions } from './bench-options.js';
import { emptyResults, finishResults, summaryLines, writeResults, type BenchResults } from './bench-report.js';

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

async function engineParts(options: BenchOptions, cleanup: Cleanup, ctx: CliContext, results: BenchResults): Promise<void> {
  // Light enough to share the load generator's process; its limit is raised so
  // that only the engine's own pace shows in the end-to-end figures.
  const sim: Simulator = await startSimulator({ port: 0, rateLimitPerMinute: 1_000_000, latencyMs: 0, maxLogEntries: 1_000_000 });
  cleanup.add('close the simulator', () => sim.close());
  const scenario: ScenarioContext = { options, cleanup, serviceUrl: sim.url, progress: ctx.stderr, profileDir: profileFolder(options, ctx) };
  for (const name of await databaseNames(options, results)) {
    if (options.sections.includes('intake')) {
      await attempt(`intake on ${name}`, results, ctx, () =>
        withDatabase(name, options, cleanup, async (db) => void results.intake.push(await runIntake(scenario, db))));
    }
    if (options.sections.includes('e2e')) {
      await attempt(`end to end on ${name}`, results, ctx, () =>
        withDatabase(name, options, cleanup, async (db) => void results.endToEnd.push(await runEndToEnd(scenario, sim, db))));
    }
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
    if (options.sections.some((s) => s !== 'matching')) {
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
