/**
 * Checks a rule beyond what its JSON Schema can say: action ids and the
 * `actions.<id>.response` references between them, template syntax (parsed by
 * the same LiquidJS set-up that renders them) and the variables each template
 * may read where it sits, regular expressions, cron schedules, and the steps
 * of SPEC 11 (literal delay durations, a delay not last, check conditions,
 * forEach sources). A rule that passes here will not fail at run time for any
 * reason visible in the file itself.
 */
import { CronTime } from 'cron';
import { Liquid } from 'liquidjs';
import { parseDuration } from './duration.js';
import { compileParams, TemplateError } from './template.js';
import { jsonPath, ruleSchemaProblems } from './rule-schema.js';
import { isStep, type Condition, type RuleAction, type RuleDefinition, type RuleProblem } from './rule.types.js';

type Segments = Array<string | number>;
type Report = (segments: Segments, message: string) => void;

/** What every template may read. */
const CONTEXT_NAMES = ['event', 'rule', 'now'];
/** Only inside the params of an action with forEach. */
const ITEM_NAMES = ['item', 'index'];

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

/** `null` when references to `actions` are not allowed at all (conditions, keys, lookup params). */
type EarlierActions = { earlier: string[]; all: string[]; current?: string } | null;

/** Where a template sits decides what it may read. */
interface TemplateScope {
  /** Earlier actions' responses, and `facts`: in action params and forEach templates only. */
  actions: EarlierActions;
  /** `item` and `index`: in the params of a forEach action only. */
  item?: boolean;
}

const KEYS_ONLY: TemplateScope = { actions: null };

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

function allowedNames(scope: TemplateScope): string[] {
  return [...CONTEXT_NAMES, ...(scope.actions === null ? [] : ['actions', 'facts']), ...(scope.item ? ITEM_NAMES : [])];
}

function variableProblem(root: string, segments: unknown[], scope: TemplateScope): string | undefined {
  if (root === 'actions') return actionReferenceProblem(segments, scope.actions);
  if (root === 'facts' && scope.actions === null) return '"facts" can only be used in action params';
  if (ITEM_NAMES.includes(root) && !scope.item) return `"${root}" can only be used in the params of an action with "forEach"`;
  const allowed = allowedNames(scope);
  return allowed.includes(root) ? undefined : `unknown variable "${root}"; templates can use ${allowed.join(', ')}`;
}

function variableProblems(text: string, scope: TemplateScope): string[] {
  const problems: string[] = [];
  for (const segments of analyzer.globalVariableSegmentsSync(text)) {
    const problem = variableProblem(String(segments[0]), segments, scope);
    if (problem !== undefined) problems.push(problem);
  }
  return problems;
}

function checkTemplates(value: unknown, at: Segments, scope: TemplateScope, report: Report): void {
  forEachString(value, at, (text, where) => {
    if (!hasTemplate(text)) return;
    try {
      compileParams(text, 'template');
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      report(where, `invalid template: ${error.message.replace(/^template: /, '')}`);
      return;
    }
    for (const message of new Set(variableProblems(text, scope))) report(where, message);
  });
}

function checkForEach(action: RuleAction, at: Segments, actions: EarlierActions, report: Report): void {
  const source = action.forEach;
  if (source === undefined) return;
  if (typeof source === 'string') {
    if (!hasTemplate(source)) report([...at, 'forEach'], 'must be a fact reference or a template yielding a list, e.g. "{{ event.data.items }}"');
    else checkTemplates(source, [...at, 'forEach'], { actions }, report);
  } else if (source.params !== undefined) {
    // Lookup params render as condition params do: with event, rule and now.
    checkTemplates(source.params, [...at, 'forEach', 'params'], KEYS_ONLY, report);
  }
}

function checkDelay(action: RuleAction, at: Segments, last: boolean, report: Report): void {
  const duration = action.params.duration;
  // A template is checked when the step runs: its value is not known here.
  if (typeof duration === 'string' && !hasTemplate(duration)) {
    const parsed = parseDuration(duration);
    if (!parsed.ok) report([...at, 'params', 'duration'], parsed.message);
  }
  if (last) report(at, 'a delay must not be the last entry: nothing would run after it');
}

function checkEntry(action: RuleAction, at: Segments, actions: NonNullable<EarlierActions>, last: boolean, report: Report): void {
  if (action.type === 'check' && action.conditions !== undefined) {
    checkConditionTree(action.conditions, [...at, 'conditions'], report);
    return;
  }
  checkTemplates(action.params, [...at, 'params'], { actions, item: action.forEach !== undefined }, report);
  if (action.type === 'delay') checkDelay(action, at, last, report);
  if (!isStep(action.type)) checkForEach(action, at, actions, report);
}

function checkActions(rule: RuleDefinition, report: Report): void {
  const all = rule.actions.flatMap((action) => (action.id === undefined ? [] : [action.id]));
  const earlier: string[] = [];
  rule.actions.forEach((action, index) => {
    const at: Segments = ['actions', index];
    checkEntry(action, at, { earlier: [...earlier], all, current: action.id }, index === rule.actions.length - 1, report);
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

function checkConditionTree(conditions: Condition, at: Segments, report: Report): void {
  forEachLeaf(conditions, at, (leaf, where) => {
    if (leaf.params !== undefined) checkTemplates(leaf.params, [...where, 'params'], KEYS_ONLY, report);
    if (leaf.operator !== 'matches' || typeof leaf.value !== 'string') return;
    try {
      new RegExp(leaf.value);
    } catch (error) {
      report([...where, 'value'], `invalid regular expression: ${(error as Error).message}`);
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
  if (rule.conditions !== undefined) checkConditionTree(rule.conditions, ['conditions'], report);
  const { throttle, debounce } = rule.options ?? {};
  if (throttle?.key !== undefined) checkTemplates(throttle.key, ['options', 'throttle', 'key'], KEYS_ONLY, report);
  if (debounce !== undefined) checkTemplates(debounce.key, ['options', 'debounce', 'key'], KEYS_ONLY, report);
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
