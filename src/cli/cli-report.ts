/**
 * What `rules:test` and `rules:backtest` share: reading their command lines,
 * printing condition outcomes and the requests actions would send, and the
 * read-only access to the service that lookups need.
 *
 * Lookups are the only thing these dry runs may send. The service client is
 * built from the SERVICE_* variables alone, so an unrelated setting of the
 * engine (ADMIN_TOKEN, DRY_RUN, …) cannot stop a dry run, and a bad key only
 * matters when a condition actually asks the service: it then shows on that
 * condition instead of failing the whole command.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { systemClock } from '../clock.js';
import { loadConfig } from '../config/config.js';
import type { BacktestEventReport, BacktestReport } from '../processing/backtest.js';
import type { ActionPreview } from '../processing/dry-run.js';
import type { Lookups } from '../rules/facts.js';
import type { ConditionResult } from '../rules/rule-evaluator.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { plural, type CliContext, type Colors } from './cli-output.js';

// ---- command lines -------------------------------------------------------

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface CommandLine {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

/** node:util parseArgs with short messages: `unknown option --x`, `--event needs a value`. */
export function readCommandLine(args: readonly string[], options: OptionSpec): CommandLine | { error: string } {
  try {
    const { positionals, values } = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
    return { positionals, values: values as CommandLine['values'] };
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    const option = /'(--?[^' =<]+)/.exec(message)?.[1] ?? '';
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return { error: `unknown option ${option}` };
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      return { error: /does not take/.test(message) ? `${option} takes no value` : `${option} needs a value` };
    }
    return { error: message.split('\n')[0] };
  }
}

/** An ISO-8601 instant from an option, or an error naming the option. */
export function instantOption(name: string, raw: string | boolean | undefined): { value?: Date; error?: string } {
  if (typeof raw !== 'string') return {};
  const ms = Date.parse(raw);
  if (Number.isNaN(ms)) return { error: `--${name} must be an ISO-8601 date-time, got "${raw}"` };
  return { value: new Date(ms) };
}

// ---- values, conditions, requests ----------------------------------------

/** JSON, shortened for a terminal line; `undefined` spelled out. */
export function show(value: unknown, max = 160): string {
  if (value === undefined) return 'undefined';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** `fact $.path {params} operator value`, as written in the rule. */
export function conditionText(condition: ConditionResult): string {
  const parts = [condition.fact];
  if (condition.params !== undefined) parts.push(show(condition.params));
  if (condition.path !== undefined) parts.push(condition.path);
  parts.push(condition.operator, show(condition.value));
  return parts.join(' ');
}

/**
 * One line per condition: mark (✓ passed, ✗ failed, ! its fact could not be
 * read, - skipped), position in the tree, the condition, and the actual value.
 */
/** Under an odd number of `not`s a leaf that fails is what lets its rule match. */
export function negated(condition: Pick<ConditionResult, 'group'>): boolean {
  return condition.group.split('.').filter((segment) => segment === 'not').length % 2 === 1;
}

/** Whether the leaf counts for its rule: its own result, turned round by the `not`s above it. */
export function passes(condition: Pick<ConditionResult, 'group' | 'result'>): boolean {
  return condition.result !== negated(condition);
}

export function conditionLines(conditions: readonly ConditionResult[], paint: Colors, indent = '  '): string[] {
  const width = Math.max(0, ...conditions.map((c) => c.group.length));
  return conditions.map((condition) => {
    const where = paint.dim(condition.group.padEnd(width));
    const text = conditionText(condition);
    if (condition.skipped) return `${indent}${paint.dim('-')} ${where}  ${paint.dim(`${text}  (skipped: not needed to decide)`)}`;
    if (condition.error !== undefined) return `${indent}${paint.red('!')} ${where}  ${text}  ${paint.red(`(error: ${condition.error})`)}`;
    const mark = passes(condition) ? paint.green('✓') : paint.red('✗');
    const negation = negated(condition) ? paint.dim(` → ${condition.result}, negated by not`) : '';
    return `${indent}${mark} ${where}  ${text}  ${paint.dim(`(actual: ${show(condition.factValue)})`)}${negation}`;
  });
}

/** `POST /v1/tasks`, `GET /v1/tasks?project_id=prj_1`: the request as the service sees it. */
export function requestLine(request: Pick<ServiceRequest, 'method' | 'path' | 'query'>): string {
  const query = request.query && Object.keys(request.query).length > 0 ? `?${new URLSearchParams(request.query).toString()}` : '';
  return `${request.method} /v1${request.path}${query}`;
}

function requestLines(request: ServiceRequest, paint: Colors, indent: string, label: string): string[] {
  const lines = [`${indent}${paint.green('→')} ${label}: ${paint.bold(requestLine(request))}`];
  // The body exactly as the client serialises it.
  if (request.body !== undefined) lines.push(`${indent}    ${JSON.stringify(request.body)}`);
  return lines;
}

/** A step or a forEach action; undefined for a plain action. */
function entryLines(preview: ActionPreview, name: string, paint: Colors, indent: string): string[] | undefined {
  if (preview.delay !== undefined) return [`${indent}${paint.yellow('⏸')} ${name}: waits ${paint.bold(preview.delay.duration)}`];
  if (preview.check !== undefined) {
    const { passed, conditions, error } = preview.check;
    const verdict = passed ? paint.green('passes now') : paint.red(`does not pass now${error ? ` (${error})` : ''}: the execution would stop here`);
    return [`${indent}${passed ? paint.green('✓') : paint.red('✗')} ${name}: ${verdict}`, ...conditionLines(conditions, paint, `${indent}    `)];
  }
  if (preview.items === undefined) return undefined;
  const lines = [`${indent}${paint.green('→')} ${name}: for each of ${plural(preview.items.length, 'item')}`];
  for (const item of preview.items) {
    if (item.request !== undefined) lines.push(...requestLines(item.request, paint, `${indent}    `, `[${item.index}]`));
    else if (item.error !== undefined) lines.push(`${indent}    ${paint.red('✗')} [${item.index}]: ${paint.red(`${item.error.code}: ${item.error.message}`)}`);
  }
  return lines;
}

/**
 * The entries' previews, numbered as in the rule: requests, delays (as their
 * duration), checks (as evaluated now) and forEach items. `total` is the
 * rule's entry count: previews stop at an entry that fails without
 * continueOnError, or a check that does not pass.
 */
export function actionLines(previews: readonly ActionPreview[], total: number, paint: Colors, indent = '  '): string[] {
  const lines: string[] = [];
  previews.forEach((preview, i) => {
    const name = `${i + 1}. ${preview.type}${preview.id !== undefined ? ` (${preview.id})` : ''}`;
    if (preview.error !== undefined) {
      lines.push(`${indent}${paint.red('✗')} ${name}: ${paint.red(`${preview.error.code}: ${preview.error.message}`)}`);
      return;
    }
    const entry = entryLines(preview, name, paint, indent);
    if (entry !== undefined) lines.push(...entry);
    else if (preview.request !== undefined) lines.push(...requestLines(preview.request, paint, indent, name));
  });
  const notRun = total - previews.length;
  if (notRun > 0) lines.push(`${indent}${paint.dim(`(${notRun === 1 ? 'the action' : `the ${notRun} actions`} after it would not run)`)}`);
  return lines;
}

/** Actions (or forEach items) that would fail. */
export function failedActions(previews: readonly ActionPreview[]): number {
  return previews.reduce((n, p) => n + (p.error !== undefined ? 1 : (p.items ?? []).filter((item) => item.error !== undefined).length), 0);
}

/** Requests that would be sent: one per plain action, one per forEach item. */
export function sentRequests(previews: readonly ActionPreview[]): number {
  return previews.reduce((n, p) => n + (p.request !== undefined ? 1 : 0) + (p.items ?? []).filter((item) => item.request !== undefined).length, 0);
}

// ---- backtest reports -----------------------------------------------------

/** An event's differences and errors; nothing for an event handled as before. */
export function eventLines(report: BacktestEventReport, rules: ReadonlyMap<string, LoadedRule>, paint: Colors): string[] {
  const { newly_matched: newly, no_longer_matched: gone } = report.differences;
  const errors = report.errors ?? [];
  if (newly.length + gone.length + errors.length === 0) return [];
  const { id, type, received_at: receivedAt, status } = report.event;
  const lines = [`${paint.bold(id)}  ${type}  ${paint.dim(`received ${receivedAt}, ${status} then`)}`];
  for (const ruleId of newly) {
    lines.push(`  ${paint.green('+')} ${ruleId}  would match now, did not then`);
    const actions = report.would_match.find((m) => m.rule === ruleId)?.actions ?? [];
    lines.push(...actionLines(actions, rules.get(ruleId)?.definition.actions.length ?? actions.length, paint, '      '));
  }
  for (const ruleId of gone) {
    const then = report.matched_then.find((m) => m.rule === ruleId);
    lines.push(`  ${paint.red('-')} ${ruleId}  matched then${then ? ` (${then.status})` : ''}, would not now`);
  }
  for (const error of errors) lines.push(`  ${paint.red('!')} ${error.rule}: ${paint.red(error.error)}`);
  return lines;
}

/** Per rule, how many events it would match now and matched then; rules not backtested are marked. */
export function ruleTable(report: BacktestReport, tested: readonly LoadedRule[], paint: Colors): string[] {
  const counts = report.summary.rules;
  const ids = [...new Set([...tested.map((rule) => rule.id), ...Object.keys(counts)])];
  if (ids.length === 0) return [];
  const testedIds = new Set(tested.map((rule) => rule.id));
  const width = Math.max(...ids.map((id) => id.length), 'per rule'.length - 2);
  const lines = [paint.bold(`${'per rule'.padEnd(width + 2)}  would match  matched then`)];
  for (const id of ids) {
    const wouldMatch = testedIds.has(id) ? String(counts[id]?.would_match ?? 0) : '-';
    const note = testedIds.has(id) ? '' : paint.dim('  (not backtested)');
    lines.push(`  ${id.padEnd(width)}  ${wouldMatch.padStart(11)}  ${String(counts[id]?.matched_then ?? 0).padStart(12)}${note}`);
  }
  return lines;
}

export function backtestSummaryLine(summary: BacktestReport['summary'], paint: Colors): string {
  if (summary.events === 0) return paint.yellow('0 events checked: no stored event matches the filter');
  const text = `${plural(summary.events, 'event')} checked: ${summary.would_match} would match, ${summary.matched_then} matched then, ${summary.differing} differing`;
  return summary.differing === 0 ? paint.green(text) : paint.yellow(text);
}

// ---- the service, read-only ----------------------------------------------

const SERVICE_VARIABLES = ['SERVICE_API_URL', 'SERVICE_API_KEY', 'SERVICE_PLAN', 'SERVICE_RATE_LIMIT_PER_MINUTE', 'SERVICE_TIMEOUT_MS'];

function refusing(message: string): Lookups {
  const fail = () => Promise.reject(new Error(message));
  return { project: fail, user: fail, tasks: fail };
}

/**
 * A factory of fresh lookups (one per event, as the engine makes them) over one
 * client, so a backtest of many events keeps to one rate budget.
 */
export function lookupsFromEnv(env: CliContext['env']): () => Lookups {
  const picked = Object.fromEntries(SERVICE_VARIABLES.map((name) => [name, env[name]]));
  let client: ServiceClient;
  try {
    client = new ServiceClient(loadConfig(picked, () => 'unused-by-dry-runs'), systemClock);
  } catch (error) {
    const message = (error as Error).message;
    return () => refusing(message);
  }
  return () => new ServiceLookups(client);
}

/** MAX_FOREACH_ITEMS as the engine reads it, so a dry run refuses the same sets the engine would. */
export function forEachLimitFromEnv(env: CliContext['env']): { value: number } | { error: string } {
  try {
    return { value: loadConfig({ MAX_FOREACH_ITEMS: env.MAX_FOREACH_ITEMS }, () => 'unused-by-dry-runs').maxForEachItems };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Said once under the conditions when a lookup was refused for want of a key. */
export function lookupHint(conditions: readonly ConditionResult[]): string | undefined {
  if (!conditions.some((c) => c.error?.includes('SERVICE_API_KEY'))) return undefined;
  return 'set SERVICE_API_KEY (and SERVICE_API_URL) to let lookups read the service: only GET requests are sent';
}
