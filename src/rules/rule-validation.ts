/**
 * Checks a rule beyond what its JSON Schema can say: action ids and the
 * `actions.<id>.response` references between them, template syntax (parsed by
 * the same LiquidJS set-up that renders them), regular expressions and cron
 * schedules. A rule that passes here will not fail at run time for any reason
 * visible in the file itself.
 */
import { CronTime } from 'cron';
import { Liquid } from 'liquidjs';
import { compileParams, TemplateError } from './template.js';
import { jsonPath, ruleSchemaProblems } from './rule-schema.js';
import type { Condition, RuleDefinition, RuleProblem } from './rule.types.js';

type Segments = Array<string | number>;
type Report = (segments: Segments, message: string) => void;

/** What a template may read, besides the responses of earlier actions. */
const CONTEXT_NAMES = ['event', 'rule', 'now'];

// Only for static analysis of templates that already parsed with the renderer's engine.
const analyzer = new Liquid();

function hasTemplate(value: string): boolean {
  return value.includes('{{') || value.includes('{%');
}

/** Calls `visit` for every string in a params value, with its location. */
function forEachString(value: unknown, at: Segments, visit: (text: string, at: Segments) => void): void {
  if (typeof value === 'string') visit(value, at);
  else if (Array.isArray(value)) value.forEach((item, index) => forEachString(item, [...at, index], visit));
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) forEachString(item, [...at, key], visit);
  }
}

/** `null` when references to `actions` are not allowed at all (conditions, throttle key). */
type EarlierActions = { earlier: string[]; all: string[]; current?: string } | null;

function actionReferenceProblem(segments: Array<string | unknown>, actions: EarlierActions): string | undefined {
  const [, id, field] = segments;
  if (actions === null) return '"actions" can only be used in action params';
  if (typeof id !== 'string') return undefined; // a computed key cannot be checked statically
  if (!actions.earlier.includes(id)) {
    if (id === actions.current) return `"actions.${id}" is this action; only earlier actions' responses are available`;
    if (actions.all.includes(id)) return `"actions.${id}" runs later; only earlier actions' responses are available`;
    const known = actions.earlier.length > 0 ? `earlier actions: ${actions.earlier.join(', ')}` : 'no earlier action has an id';
    return `"actions.${id}" is not an earlier action (${known})`;
  }
  if (field !== undefined && field !== 'response') return `"actions.${id}" only has "response"`;
  return undefined;
}

function variableProblems(text: string, actions: EarlierActions): string[] {
  const allowed = actions === null ? CONTEXT_NAMES : [...CONTEXT_NAMES, 'actions'];
  const problems: string[] = [];
  for (const segments of analyzer.globalVariableSegmentsSync(text)) {
    const root = String(segments[0]);
    if (root === 'actions') {
      const problem = actionReferenceProblem(segments, actions);
      if (problem !== undefined) problems.push(problem);
    } else if (!allowed.includes(root)) {
      problems.push(`unknown variable "${root}"; templates can use ${allowed.join(', ')}`);
    }
  }
  return problems;
}

function checkTemplates(value: unknown, at: Segments, actions: EarlierActions, report: Report): void {
  forEachString(value, at, (text, where) => {
    if (!hasTemplate(text)) return;
    try {
      compileParams(text, 'template');
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      report(where, `invalid template: ${error.message.replace(/^template: /, '')}`);
      return;
    }
    for (const message of new Set(variableProblems(text, actions))) report(where, message);
  });
}

function checkActions(rule: RuleDefinition, report: Report): void {
  const all = rule.actions.flatMap((action) => (action.id === undefined ? [] : [action.id]));
  const earlier: string[] = [];
  rule.actions.forEach((action, index) => {
    const at: Segments = ['actions', index];
    checkTemplates(action.params, [...at, 'params'], { earlier: [...earlier], all, current: action.id }, report);
    if (action.id === undefined) return;
    if (earlier.includes(action.id)) report([...at, 'id'], `duplicate action id "${action.id}"`);
    else earlier.push(action.id);
  });
}

function forEachLeaf(condition: Condition, at: Segments, visit: (leaf: Extract<Condition, { fact: string }>, at: Segments) => void): void {
  if ('all' in condition) condition.all.forEach((child, index) => forEachLeaf(child, [...at, 'all', index], visit));
  else if ('any' in condition) condition.any.forEach((child, index) => forEachLeaf(child, [...at, 'any', index], visit));
  else if ('not' in condition) forEachLeaf(condition.not, [...at, 'not'], visit);
  else visit(condition, at);
}

function checkConditions(rule: RuleDefinition, report: Report): void {
  if (rule.conditions === undefined) return;
  forEachLeaf(rule.conditions, ['conditions'], (leaf, at) => {
    if (leaf.params !== undefined) checkTemplates(leaf.params, [...at, 'params'], null, report);
    if (leaf.operator !== 'matches' || typeof leaf.value !== 'string') return;
    try {
      new RegExp(leaf.value);
    } catch (error) {
      report([...at, 'value'], `invalid regular expression: ${(error as Error).message}`);
    }
  });
}

function checkSchedule(rule: RuleDefinition, report: Report): void {
  if (rule.schedule === undefined) return;
  const { cron, timezone } = rule.schedule;
  try {
    new CronTime(cron);
  } catch (error) {
    report(['schedule', 'cron'], `invalid cron expression: ${(error as Error).message}`);
  }
  if (timezone === undefined) return;
  try {
    new CronTime('* * * * *', timezone);
  } catch {
    report(['schedule', 'timezone'], `unknown time zone "${timezone}"; use an IANA name such as Europe/Berlin`);
  }
}

/** Problems a schema-valid rule can still have. */
export function semanticProblems(rule: RuleDefinition, file: string, index?: number): RuleProblem[] {
  const problems: RuleProblem[] = [];
  const report: Report = (segments, message) => problems.push({ file, path: jsonPath(segments, index), message });
  checkActions(rule, report);
  checkConditions(rule, report);
  const key = rule.options?.throttle?.key;
  if (key !== undefined) checkTemplates(key, ['options', 'throttle', 'key'], null, report);
  checkSchedule(rule, report);
  return problems;
}

/**
 * Every problem of one rule, as parsed JSON of unknown shape; `index` is its
 * position in an array file. The semantic checks need the shape the schema
 * guarantees, so they run only once the schema passes.
 */
export function validateRule(json: unknown, file: string, index?: number): RuleProblem[] {
  const structural = ruleSchemaProblems(json, file, index);
  if (structural.length > 0) return structural;
  return semanticProblems(json as RuleDefinition, file, index);
}
