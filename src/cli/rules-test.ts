/**
 * `npm run rules:test -- RULE_FILE --event EVENT_FILE`: dry-runs one rule
 * against one event, as the engine would evaluate it, and prints each
 * condition's outcome and the exact requests the actions would send. Nothing
 * is sent but the lookups (GET) a condition asks for. Exit codes: 0 it ran,
 * 1 the rule file is invalid or an --expect-* flag was not met, 2 usage error
 * or unreadable file.
 */
import { readFile, stat } from 'node:fs/promises';
import { parseEnvelope, type EventEnvelope } from '../intake/envelope.js';
import { testRule, type RuleTestResult } from '../processing/dry-run.js';
import { loadRulePath, type RuleFiles } from '../rules/rule-files.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { colors, isEntryFile, runCommand, plural, processContext, type CliContext, type Colors } from './cli-output.js';
import {
  actionLines, conditionLines, failedActions, forEachLimitFromEnv, instantOption, lookupHint, lookupsFromEnv, readCommandLine, sentRequests,
  passes,
} from './cli-report.js';
import { problemLine } from './rules-validate.js';

export const USAGE = [
  'usage: npm run rules:test -- RULE_FILE --event EVENT_FILE [--rule ID] [--now ISO] [--expect-match | --expect-no-match] [--json]',
  '  RULE_FILE            a rule file; --rule ID picks one rule when it holds several',
  '  --event EVENT_FILE   the event envelope to test with (see examples/events/)',
  '  --now ISO            the instant the `now` fact sees (default: the current time)',
  '  --expect-match       exit 1 unless the rule listens to the event and matches (for CI)',
  '  --expect-no-match    exit 1 if it does',
  '  --json               print the raw result',
  'Nothing is sent but lookups (GET), and those only with SERVICE_API_KEY (and SERVICE_API_URL) set.',
  'Exit codes: 0 it ran, 1 invalid rule file or expectation not met, 2 usage error or unreadable file.',
].join('\n');

const OPTIONS = {
  event: { type: 'string' },
  rule: { type: 'string' },
  now: { type: 'string' },
  'expect-match': { type: 'boolean' },
  'expect-no-match': { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export interface TestOptions {
  ruleFile: string;
  eventFile: string;
  ruleId?: string;
  now?: Date;
  expect?: 'match' | 'no-match';
  json: boolean;
}

type Parsed = { help: true } | { help: false; options: TestOptions } | { error: string };

export function parseArgs(args: readonly string[]): Parsed {
  const line = readCommandLine(args, OPTIONS);
  if ('error' in line) return line;
  const { positionals, values } = line;
  if (values.help === true) return { help: true };
  if (positionals.length !== 1) return { error: positionals.length === 0 ? 'RULE_FILE is required' : `expected one RULE_FILE, got ${positionals.length}` };
  if (typeof values.event !== 'string') return { error: '--event EVENT_FILE is required' };
  if (values['expect-match'] === true && values['expect-no-match'] === true) return { error: '--expect-match and --expect-no-match exclude each other' };
  const now = instantOption('now', values.now);
  if (now.error !== undefined) return { error: now.error };
  const options: TestOptions = { ruleFile: positionals[0], eventFile: values.event, json: values.json === true };
  if (typeof values.rule === 'string') options.ruleId = values.rule;
  if (now.value !== undefined) options.now = now.value;
  if (values['expect-match'] === true) options.expect = 'match';
  if (values['expect-no-match'] === true) options.expect = 'no-match';
  return { help: false, options };
}

class UsageError extends Error {}

function notFound(error: unknown): boolean {
  return (error as { code?: string }).code === 'ENOENT';
}

async function readEvent(path: string): Promise<EventEnvelope> {
  let raw: Buffer;
  try {
    raw = await readFile(path);
  } catch (error) {
    throw new UsageError(notFound(error) ? `event file not found: ${path}` : `cannot read event file ${path}: ${(error as Error).message}`);
  }
  const parsed = parseEnvelope(raw);
  if (!parsed.ok) throw new UsageError(`${path} is not a valid event: ${parsed.message}`);
  return parsed.envelope;
}

async function readRules(path: string): Promise<RuleFiles> {
  try {
    if (!(await stat(path)).isFile()) throw new UsageError(`${path} is not a file`);
    return await loadRulePath(path);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(notFound(error) ? `rule file not found: ${path}` : `cannot read rule file ${path}: ${(error as Error).message}`);
  }
}

export function pickRule(rules: readonly LoadedRule[], id: string | undefined, file: string): LoadedRule {
  const ids = rules.map((rule) => rule.id).join(', ');
  if (id !== undefined) {
    const rule = rules.find((candidate) => candidate.id === id);
    if (rule === undefined) throw new UsageError(`no rule "${id}" in ${file} (it holds: ${ids || 'no rules'})`);
    return rule;
  }
  if (rules.length === 1) return rules[0];
  if (rules.length === 0) throw new UsageError(`${file} holds no rules`);
  throw new UsageError(`${file} holds ${rules.length} rules (${ids}): choose one with --rule ID`);
}

/** Whether the engine would run the rule's actions for this event (its enabled flag aside). */
export function fires(result: RuleTestResult): boolean {
  return result.listens && result.matched && result.error === undefined;
}

function headerLines(rule: LoadedRule, result: RuleTestResult, event: EventEnvelope, files: { rule: string; event: string }, paint: Colors): string[] {
  const state = rule.enabled ? paint.dim('enabled') : paint.yellow('disabled: the engine would not run it');
  const listens = result.listens
    ? `${paint.green('yes')} (on ${rule.triggers.join(', ')})`
    : `${paint.red('no')}: it listens to ${rule.triggers.join(', ') || 'nothing'}, not ${event.type}`;
  return [
    `${paint.bold('rule')}     ${rule.id}  ${paint.dim(`${files.rule}, version ${rule.version},`)} ${state}`,
    `${paint.bold('event')}    ${event.id}  ${event.type}  ${paint.dim(files.event)}`,
    `${paint.bold('listens')}  ${listens}`,
  ];
}

function conditionSection(rule: LoadedRule, result: RuleTestResult, event: EventEnvelope, paint: Colors): string[] {
  if (rule.definition.conditions === undefined) return [`${paint.bold('conditions')} none: the rule matches every event it listens to`];
  const lines = [paint.bold('conditions'), ...conditionLines(result.conditions, paint)];
  // A failed lookup already shows on its condition; other errors (a bad regular expression, …) only here.
  const shown = result.conditions.some((c) => c.error !== undefined);
  if (result.error !== undefined && !shown) lines.push(`  ${paint.red(`could not evaluate: ${result.error}`)}`);
  const hint = lookupHint(result.conditions);
  if (hint !== undefined) lines.push(`  ${paint.dim(`note: ${hint}`)}`);
  const usesChanges = result.conditions.some((c) => c.fact === 'changes');
  if (usesChanges && (event.data as { changes?: unknown }).changes === undefined) {
    lines.push(`  ${paint.dim('note: changes is {} here: the event has no data.changes, and a single event has no earlier version to compare with')}`);
  }
  return lines;
}

function actionSection(rule: LoadedRule, result: RuleTestResult, paint: Colors): string[] {
  if (!result.matched || result.error !== undefined) return [`${paint.bold('actions')}  none: the rule did not match`];
  const heading = result.listens ? 'actions (the requests they would send; nothing was sent)' : 'actions (would send these if the rule listened to the event)';
  return [paint.bold(heading), ...actionLines(result.actions, rule.definition.actions.length, paint)];
}

export function summaryLine(result: RuleTestResult, event: EventEnvelope, paint: Colors): string {
  const subject = `${result.rule} on ${event.id}`;
  if (result.error !== undefined) return paint.red(`✗ no match: ${subject}: could not be evaluated (see above)`);
  if (!result.listens) {
    const also = result.matched ? ' (its conditions would match)' : '';
    return paint.red(`✗ no match: ${subject}: the rule does not listen to ${event.type}${also}`);
  }
  const leaves = result.conditions.filter((c) => !c.skipped);
  if (!result.matched) {
    const failed = leaves.filter((c) => !passes(c)).length;
    return paint.red(`✗ no match: ${subject}: ${failed} of ${plural(leaves.length, 'condition')} failed`);
  }
  const failures = failedActions(result.actions);
  const passed = leaves.length === 0 ? 'no conditions' : `${plural(leaves.filter((c) => passes(c)).length, 'condition')} passed`;
  const stopped = result.actions.some((preview) => preview.check?.passed === false) ? ', a check would stop it now' : '';
  const text = `${subject}: ${passed}, ${plural(sentRequests(result.actions), 'request')} would be sent${stopped}`;
  if (failures > 0) return paint.yellow(`✓ match: ${text}, ${plural(failures, 'action')} would fail`);
  return paint.green(`✓ match: ${text}`);
}

export function reportLines(rule: LoadedRule, result: RuleTestResult, event: EventEnvelope, files: { rule: string; event: string }, paint: Colors): string[] {
  return [
    ...headerLines(rule, result, event, files, paint),
    ...conditionSection(rule, result, event, paint),
    ...actionSection(rule, result, paint),
    summaryLine(result, event, paint),
  ];
}

function expectationLine(expect: TestOptions['expect'], fired: boolean, paint: Colors): { line?: string; met: boolean } {
  if (expect === undefined) return { met: true };
  const met = (expect === 'match') === fired;
  const flag = `--expect-${expect}`;
  if (met) return { met, line: paint.green(`✓ as expected (${flag})`) };
  return { met, line: paint.red(`✗ not as expected: ${flag}, but the rule ${fired ? 'matched' : 'did not match'}`) };
}

async function run(options: TestOptions, context: CliContext): Promise<number> {
  const paint = colors(context.color);
  const event = await readEvent(options.eventFile);
  const files = await readRules(options.ruleFile);
  if (files.problems.length > 0) {
    if (options.json) context.stdout(JSON.stringify({ problems: files.problems }, null, 2));
    else {
      for (const problem of files.problems) context.stdout(problemLine(problem, paint));
      context.stdout(paint.red(`${options.ruleFile} is invalid (${plural(files.problems.length, 'problem')}): nothing was tested`));
    }
    return 1;
  }
  const rule = pickRule(files.rules, options.ruleId, options.ruleFile);
  const limit = forEachLimitFromEnv(context.env);
  if ('error' in limit) throw new UsageError(limit.error);
  const result = await testRule(rule, event, { lookups: lookupsFromEnv(context.env)(), now: options.now ?? new Date(), maxForEachItems: limit.value });
  const expectation = expectationLine(options.expect, fires(result), paint);
  if (options.json) context.stdout(JSON.stringify(result, null, 2));
  else {
    for (const line of reportLines(rule, result, event, { rule: options.ruleFile, event: options.eventFile }, paint)) context.stdout(line);
    if (expectation.line !== undefined) context.stdout(expectation.line);
  }
  return expectation.met ? 0 : 1;
}

/** Runs the command; returns the exit code. */
export async function rulesTest(args: readonly string[], context: CliContext): Promise<number> {
  return runCommand('rules:test', USAGE, parseArgs(args), context, (options) => run(options, context), UsageError);
}

export async function main(): Promise<void> {
  process.exitCode = await rulesTest(process.argv.slice(2), processContext());
}

if (isEntryFile(import.meta.url)) await main();
