/**
 * `npm run rules:backtest [-- PATH]`: runs the rule files at PATH as a dry
 * run against the events the (stopped) engine stored, and shows where the
 * outcome would differ from what happened: rules that would match now and did
 * not then (with the requests they would send), and rules that matched then and
 * would not now. Invalid rule files are reported and skipped, as the engine
 * does; disabled rules (in their file or through the admin API, whose choice
 * is stored in the database) are skipped unless --include-disabled.
 *
 * The database is only read, apart from migrations bringing an older schema
 * up to date; a SQLite file that does not exist is an error, never created.
 * Exit codes: 0 it ran, 1 differences with --fail-on-difference, 2 usage or
 * database error.
 */
import { existsSync } from 'node:fs';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../database/data-source.js';
import { BACKTEST_DEFAULT_LIMIT, BACKTEST_MAX_LIMIT, runBacktest, type BacktestFilter, type BacktestReport } from '../processing/backtest.js';
import { loadRulePath } from '../rules/rule-files.js';
import { RuleStateEntity } from '../database/rule-state.entity.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { colors, isEntryFile, runCommand, plural, processContext, type CliContext } from './cli-output.js';
import { backtestSummaryLine, eventLines, forEachLimitFromEnv, instantOption, lookupsFromEnv, readCommandLine, ruleTable } from './cli-report.js';
import { problemLine } from './rules-validate.js';

export const USAGE = [
  'usage: npm run rules:backtest [-- PATH] [--since ISO] [--until ISO] [--type T] [--limit N] [--database URL]',
  '                              [--include-disabled] [--fail-on-difference] [--json]',
  '  PATH                  a rule file or folder (default $RULES_DIR or ./rules)',
  '  --since/--until ISO   only events received in this interval',
  '  --type T              only events of this type',
  `  --limit N             the newest N events (default ${BACKTEST_DEFAULT_LIMIT}, at most ${BACKTEST_MAX_LIMIT}), replayed oldest first`,
  '  --database URL        default $DATABASE_URL or sqlite:./data/engine.sqlite (the stopped engine\'s database)',
  '  --include-disabled    backtest disabled rules too',
  '  --fail-on-difference  exit 1 when any event would be handled differently',
  '  --json                print the raw report',
  'Nothing is sent but lookups (GET), and those only with SERVICE_API_KEY (and SERVICE_API_URL) set.',
  'Exit codes: 0 it ran, 1 differences with --fail-on-difference, 2 usage or database error.',
].join('\n');

const OPTIONS = {
  since: { type: 'string' },
  until: { type: 'string' },
  type: { type: 'string' },
  limit: { type: 'string' },
  database: { type: 'string' },
  'include-disabled': { type: 'boolean' },
  'fail-on-difference': { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export interface BacktestOptions {
  rulesPath: string;
  databaseUrl: string;
  filter: BacktestFilter;
  includeDisabled: boolean;
  failOnDifference: boolean;
  json: boolean;
}

type Parsed = { help: true } | { help: false; options: BacktestOptions } | { error: string };

function setting(env: CliContext['env'], name: string, fallback: string): string {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? fallback : value;
}

function parseFilter(values: Record<string, string | boolean | undefined>): BacktestFilter | { error: string } {
  const filter: BacktestFilter = {};
  for (const name of ['since', 'until'] as const) {
    const instant = instantOption(name, values[name]);
    if (instant.error !== undefined) return { error: instant.error };
    if (instant.value !== undefined) filter[name] = instant.value.toISOString();
  }
  if (filter.since !== undefined && filter.until !== undefined && filter.since > filter.until) return { error: '--since is after --until' };
  if (typeof values.type === 'string') {
    if (values.type.trim() === '') return { error: '--type needs an event type' };
    filter.type = values.type;
  }
  if (typeof values.limit === 'string') {
    const limit = /^\d+$/.test(values.limit) ? Number(values.limit) : Number.NaN;
    if (!(limit >= 1 && limit <= BACKTEST_MAX_LIMIT)) return { error: `--limit must be a whole number from 1 to ${BACKTEST_MAX_LIMIT}, got "${values.limit}"` };
    filter.limit = limit;
  }
  return filter;
}

export function parseArgs(args: readonly string[], env: CliContext['env']): Parsed {
  const line = readCommandLine(args, OPTIONS);
  if ('error' in line) return line;
  const { positionals, values } = line;
  if (values.help === true) return { help: true };
  if (positionals.length > 1) return { error: `expected one PATH, got ${positionals.length}` };
  const filter = parseFilter(values);
  if ('error' in filter) return filter;
  const databaseUrl = typeof values.database === 'string' ? values.database : setting(env, 'DATABASE_URL', 'sqlite:./data/engine.sqlite');
  return {
    help: false,
    options: {
      rulesPath: positionals[0] ?? setting(env, 'RULES_DIR', './rules'),
      databaseUrl,
      filter,
      includeDisabled: values['include-disabled'] === true,
      failOnDifference: values['fail-on-difference'] === true,
      json: values.json === true,
    },
  };
}

/** Usage, rule path or database trouble: exit 2 with its message. */
export class CommandError extends Error {}

/** The URL as it may be printed: a PostgreSQL password is never shown. */
export function displayUrl(url: string): string {
  if (!url.startsWith('postgres')) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}

/** Opens the engine's database without creating one: the file must exist and hold the engine's tables. */
export async function openEngineDatabase(url: string): Promise<DataSource> {
  if (url === 'sqlite::memory:') throw new CommandError('an in-memory database holds no stored events: pass the engine\'s database with --database sqlite:PATH');
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length);
    if (file === '' || !existsSync(file)) throw new CommandError(`database file not found: ${file} (pass the engine's database with --database sqlite:PATH, or set DATABASE_URL)`);
  } else if (!/^postgres(ql)?:\/\/.+/.test(url)) {
    throw new CommandError(`--database / DATABASE_URL must be sqlite:PATH or postgres://…, got a value starting "${url.split(':')[0]}:"`);
  }
  const dataSource = new DataSource({ ...dataSourceOptions(url), migrationsRun: false });
  try {
    await dataSource.initialize();
  } catch (error) {
    throw new CommandError(`cannot open ${displayUrl(url)}: ${(error as Error).message}`);
  }
  try {
    const runner = dataSource.createQueryRunner();
    const isEngine = await runner.hasTable('events').finally(() => runner.release());
    if (!isEngine) throw new CommandError(`${displayUrl(url)} has no events table: is it the engine's database?`);
    await dataSource.runMigrations({ transaction: 'all' });
    return dataSource;
  } catch (error) {
    await dataSource.destroy();
    if (error instanceof CommandError) throw error;
    throw new CommandError(`cannot read ${displayUrl(url)}: ${(error as Error).message}`);
  }
}

export interface DisabledRule {
  id: string;
  by: 'file' | 'admin API';
}

/**
 * The rules the engine would run: a stored enable/disable choice overrides the
 * file (as the registry applies it). The rules returned are enabled, since the
 * rule index passes over disabled ones.
 */
export function enabledRules(rules: readonly LoadedRule[], overrides: ReadonlyMap<string, boolean>, includeDisabled = false) {
  const enabled: LoadedRule[] = [];
  const disabled: DisabledRule[] = [];
  for (const rule of rules) {
    const override = overrides.get(rule.id);
    if (includeDisabled || (override ?? rule.enabled)) enabled.push(rule.enabled ? rule : { ...rule, enabled: true });
    else disabled.push({ id: rule.id, by: override === false ? 'admin API' : 'file' });
  }
  return { enabled, disabled };
}

async function backtest(options: BacktestOptions, dataSource: DataSource, rules: readonly LoadedRule[], context: CliContext) {
  const states = await dataSource.manager.find(RuleStateEntity);
  const selection = enabledRules(rules, new Map(states.map((s) => [s.ruleId, s.enabled])), options.includeDisabled);
  const tested = selection.enabled;
  const limit = forEachLimitFromEnv(context.env);
  if ('error' in limit) throw new CommandError(limit.error);
  const deps = { lookups: lookupsFromEnv(context.env), now: new Date(), maxForEachItems: limit.value };
  const report = await runBacktest(dataSource.manager, tested, options.filter, deps);
  return { report, tested, disabled: selection.disabled };
}

function printReport(options: BacktestOptions, result: Awaited<ReturnType<typeof backtest>>, context: CliContext): void {
  const { report, tested, disabled } = result;
  const paint = colors(context.color);
  context.stdout(`${paint.bold('backtest')} ${plural(tested.length, 'rule')} from ${options.rulesPath} against ${displayUrl(options.databaseUrl)}`);
  if (disabled.length > 0) {
    context.stdout(paint.dim(`skipped, disabled: ${disabled.map((d) => `${d.id} (${d.by})`).join(', ')}; --include-disabled tests them too`));
  }
  const byId = new Map(tested.map((rule) => [rule.id, rule]));
  for (const event of report.events) {
    const lines = eventLines(event, byId, paint);
    if (lines.length > 0) context.stdout('');
    for (const line of lines) context.stdout(line);
  }
  context.stdout('');
  for (const line of ruleTable(report, tested, paint)) context.stdout(line);
  for (const note of notes(options, report)) context.stdout(paint.dim(`note: ${note}`));
  context.stdout(backtestSummaryLine(report.summary, paint));
}

function notes(options: BacktestOptions, report: BacktestReport): string[] {
  const limit = options.filter.limit ?? BACKTEST_DEFAULT_LIMIT;
  const extra = report.events.length >= limit ? [`only the newest ${plural(limit, 'event')} were checked: --limit N for more`] : [];
  return [...report.notes, ...extra];
}

function reportProblems(problems: Awaited<ReturnType<typeof loadRulePath>>['problems'], context: CliContext): void {
  if (problems.length === 0) return;
  const paint = colors(false);
  for (const problem of problems) context.stderr(problemLine(problem, paint));
  const files = new Set(problems.map((p) => p.file)).size;
  context.stderr(`rules:backtest: ${plural(problems.length, 'problem')} in ${plural(files, 'file')}: the invalid rules are skipped, as the engine does`);
}

async function run(options: BacktestOptions, context: CliContext): Promise<number> {
  if (!existsSync(options.rulesPath)) throw new CommandError(`rules path not found: ${options.rulesPath}`);
  const files = await loadRulePath(options.rulesPath).catch((error: Error) => {
    throw new CommandError(`cannot read ${options.rulesPath}: ${error.message}`);
  });
  reportProblems(files.problems, context);
  if (files.files.length === 0) context.stderr(`rules:backtest: no rule files in ${options.rulesPath}`);
  const dataSource = await openEngineDatabase(options.databaseUrl);
  let result;
  try {
    result = await backtest(options, dataSource, files.rules, context);
  } catch (error) {
    throw new CommandError(`backtest failed: ${(error as Error).message}`);
  } finally {
    await dataSource.destroy();
  }
  if (options.json) context.stdout(JSON.stringify(result.report, null, 2));
  else printReport(options, result, context);
  return options.failOnDifference && result.report.summary.differing > 0 ? 1 : 0;
}

/** Runs the command; returns the exit code. */
export async function rulesBacktest(args: readonly string[], context: CliContext): Promise<number> {
  return runCommand('rules:backtest', USAGE, parseArgs(args, context.env), context, (options) => run(options, context), CommandError);
}

export async function main(): Promise<void> {
  process.exitCode = await rulesBacktest(process.argv.slice(2), processContext());
}

if (isEntryFile(import.meta.url)) await main();
