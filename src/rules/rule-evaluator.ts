/**
 * Evaluates rules' conditions against an event with json-rules-engine and
 * records every condition's outcome, so "why did (or didn't) this rule fire?"
 * has an answer (SPEC 6, Explanations).
 *
 * Each rule is compiled once into a json-rules-engine Rule inside its own
 * Engine (operators, fact priorities), cached per LoadedRule. Per event we do
 * not call `engine.run()`: concurrent runs of one Engine share its `status`
 * field, and a run that finishes while another is starting makes the other
 * skip its rules and report nothing (seen with json-rules-engine 7.3.1 when two
 * events meet the same rule). `Rule#evaluate(almanac)`, the step `run()`
 * performs for each rule, keeps no state of its own, and the Almanac it is
 * given (an EventAlmanac, a few Map entries) carries the event's facts.
 *
 * A rule whose conditions read no lookup (only `event`, `changes`, `now`) is
 * evaluated by `evaluateLocally` instead: the same walk as `Rule#evaluate`
 * over the same compiled conditions, with the same operators and facts, but
 * synchronous. json-rules-engine's walk makes a promise for every condition
 * and every fact and deep-copies the conditions for each result: with the
 * local walk the engine's main thread does about 5 % less work per event for
 * the benchmark's one-condition rule (instructions per event, `npm run
 * bench:instructions`: 1.22 → 1.16 M). Rules with lookups keep
 * json-rules-engine's walk, which waits for them, and so does a rule whose
 * local walk fails (an unknown operator, a value an operator cannot take): the
 * engine's walk then reports the failure as it always has. A property test
 * (rule-evaluator.spec.ts) holds the two walks to the same answers.
 */
import { Engine, Rule, type Almanac, type RuleResult, type TopLevelCondition as JreCondition } from 'json-rules-engine';
import {
  EventAlmanac, FACT_NAMES, isRemoteFact, LOCAL_FACT_PRIORITY, REMOTE_FACT_PRIORITY, resolvePath, RULE_FACTS,
  type EventFacts, type FactScope, type RuleEvent,
} from './facts.js';
import { addExtraOperators } from './operators.js';
import type { CandidateOptions, ExcludedRule, RuleIndex } from './rule-index.js';
import type { Condition, ConditionLeaf, LoadedRule, TopLevelCondition } from './rule.types.js';

export interface ConditionResult {
  fact: string;
  path?: string;
  params?: Record<string, unknown>;
  operator: string;
  /** The expected value (resolved, when it is a `{fact: …}` reference). */
  value: unknown;
  /** What the fact (at `path`) held; absent when it was undefined. */
  factValue: unknown;
  result: boolean;
  /** Where the condition sits, e.g. `all[1].any[0]`. */
  group: string;
  /** Not evaluated: json-rules-engine had decided without it, or the rule could not run. */
  skipped?: true;
  /** The fact could not be obtained (a lookup failed). */
  error?: string;
}

export interface RuleEvaluation {
  ruleId: string;
  ruleVersion: string;
  matched: boolean;
  conditions: ConditionResult[];
  error?: string;
}

export interface EventEvaluation {
  /** One per candidate rule, by priority (higher first) then id. */
  evaluations: RuleOutcome[];
  /** Rules the index skipped, with the reason; empty unless `explainExcluded`. */
  excluded: ExcludedRule[];
}

/** `Rule#evaluate` exists on every json-rules-engine version but is not in its typings. */
type EvaluableRule = Rule & { evaluate(almanac: Almanac): Promise<RuleResult> };

interface CompiledRule {
  scope: FactScope;
  rule?: EvaluableRule;
  /** No lookup anywhere in the conditions: `evaluateLocally` may walk them. */
  local?: boolean;
  /** Why the rule cannot be evaluated at all (unknown fact, invalid conditions). */
  error?: string;
}

const compiledRules = new WeakMap<LoadedRule, CompiledRule>();

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function factsUsed(condition: Condition, names: Set<string>): Set<string> {
  if ('all' in condition) condition.all.forEach((child) => factsUsed(child, names));
  else if ('any' in condition) condition.any.forEach((child) => factsUsed(child, names));
  else if ('not' in condition) factsUsed(condition.not, names);
  else {
    names.add(condition.fact);
    const value = condition.value as { fact?: unknown } | null;
    if (typeof value === 'object' && value !== null && typeof value.fact === 'string') names.add(value.fact);
  }
  return names;
}

function refersToRemote(leaf: ConditionLeaf): boolean {
  const value = leaf.value as { fact?: unknown } | null;
  return isRemoteFact(leaf.fact) || (typeof value === 'object' && value !== null && isRemoteFact(String(value.fact)));
}

/**
 * json-rules-engine orders a group's conditions by priority and stops once
 * the group is decided, but gives every all/any/not group priority 1, the
 * same as a lookup: a group of event conditions would then run side by side
 * with a lookup it could have made unnecessary. Groups without an explicit
 * priority get the priority of their slowest fact.
 */
function withGroupPriorities(condition: Condition): { condition: Condition; remote: boolean } {
  if ('fact' in condition) return { condition, remote: refersToRemote(condition) };
  let children: Condition[];
  let rebuild: (children: Condition[]) => Condition;
  if ('all' in condition) [children, rebuild] = [condition.all, (all) => ({ ...condition, all })];
  else if ('any' in condition) [children, rebuild] = [condition.any, (any) => ({ ...condition, any })];
  else [children, rebuild] = [[condition.not], ([not]) => ({ ...condition, not })];
  const results = children.map(withGroupPriorities);
  const remote = results.some((result) => result.remote);
  const rebuilt = rebuild(results.map((result) => result.condition)) as Condition & { priority?: number };
  rebuilt.priority ??= remote ? REMOTE_FACT_PRIORITY : LOCAL_FACT_PRIORITY;
  return { condition: rebuilt, remote };
}

function buildRule(conditions: TopLevelCondition, id: string): EvaluableRule {
  const engine = new Engine([], { allowUndefinedFacts: true });
  addExtraOperators(engine);
  // Registered for their priorities, which order the conditions; values come from the almanac.
  for (const fact of RULE_FACTS) engine.addFact(fact);
  const prioritized = withGroupPriorities(conditions).condition as JreCondition;
  const rule = new Rule({ conditions: prioritized, event: { type: 'matched' }, name: id });
  engine.addRule(rule);
  return rule as EvaluableRule;
}

function compile(rule: LoadedRule): CompiledRule {
  const { conditions, name, schedule } = rule.definition;
  const scope: FactScope = { rule: { id: rule.id, name }, timezone: schedule?.timezone };
  return conditions === undefined ? { scope } : compileConditions(conditions, scope, rule.id);
}

function compileConditions(conditions: TopLevelCondition, scope: FactScope, name: string): CompiledRule {
  const unknown = [...factsUsed(conditions, new Set())].filter((fact) => !FACT_NAMES.has(fact));
  if (unknown.length > 0) {
    const known = [...FACT_NAMES].join(', ');
    return { scope, error: `unknown fact ${unknown.map((fact) => `"${fact}"`).join(', ')} (facts are: ${known})` };
  }
  try {
    const facts = factsUsed(conditions, new Set());
    return { scope, rule: buildRule(conditions, name), local: ![...facts].some(isRemoteFact) && onlyFactsAndGroups(conditions) };
  } catch (error) {
    return { scope, error: `invalid conditions: ${messageOf(error)}` };
  }
}

function compiled(rule: LoadedRule): CompiledRule {
  let result = compiledRules.get(rule);
  if (result === undefined) {
    result = compile(rule);
    compiledRules.set(rule, result);
  }
  return result;
}

/** Whether the rule's conditions are walked by `evaluateLocally` (they read no lookup) rather than by json-rules-engine. */
export function evaluatedLocally(rule: LoadedRule): boolean {
  return compiled(rule).local === true;
}

/** Compiles rules ahead of their first event (otherwise done lazily, once per LoadedRule). */
export function compileRules(rules: readonly LoadedRule[]): void {
  for (const rule of rules) compiled(rule);
}

/** A condition as written, or as json-rules-engine returns it with its outcome. */
interface ConditionNode {
  all?: ConditionNode[];
  any?: ConditionNode[];
  not?: ConditionNode;
  fact?: string;
  path?: string;
  params?: Record<string, unknown>;
  operator?: string;
  value?: unknown;
  factResult?: unknown;
  valueResult?: unknown;
  result?: boolean;
}

function leafResult(node: ConditionNode, group: string, failures?: ReadonlyMap<string, string>): ConditionResult {
  const evaluated = typeof node.result === 'boolean';
  const fact = String(node.fact);
  const result: ConditionResult = {
    fact,
    operator: String(node.operator),
    value: evaluated ? node.valueResult : node.value,
    factValue: node.factResult,
    result: node.result === true,
    group,
  };
  if (node.path !== undefined) result.path = node.path;
  if (node.params !== undefined) result.params = node.params;
  if (!evaluated) result.skipped = true;
  const failure = failures?.get(fact);
  if (evaluated && failure !== undefined) result.error = failure;
  return result;
}

/** Depth-first, in the order written: one entry per leaf condition. */
export function flattenConditions(
  node: ConditionNode,
  failures?: ReadonlyMap<string, string>,
  group = '',
  out: ConditionResult[] = [],
): ConditionResult[] {
  const at = (step: string) => (group === '' ? step : `${group}.${step}`);
  if (Array.isArray(node.all)) node.all.forEach((child, i) => flattenConditions(child, failures, at(`all[${i}]`), out));
  else if (Array.isArray(node.any)) node.any.forEach((child, i) => flattenConditions(child, failures, at(`any[${i}]`), out));
  else if (node.not !== undefined) flattenConditions(node.not, failures, at('not'), out);
  else out.push(leafResult(node, group, failures));
  return out;
}

type Verdict = Pick<RuleEvaluation, 'matched' | 'conditions' | 'error'>;

/** Every node an all/any/not group or a leaf with a fact (no named condition references): what `evaluateLocally` walks. */
function onlyFactsAndGroups(condition: Condition): boolean {
  if ('all' in condition) return Array.isArray(condition.all) && condition.all.every(onlyFactsAndGroups);
  if ('any' in condition) return Array.isArray(condition.any) && condition.any.every(onlyFactsAndGroups);
  if ('not' in condition) return !Array.isArray(condition.not) && onlyFactsAndGroups(condition.not);
  return typeof (condition as Partial<ConditionLeaf>).fact === 'string';
}

/** json-rules-engine's Condition, as much of it as the local walk reads. */
interface EngineCondition {
  operator: string;
  all?: EngineCondition[];
  any?: EngineCondition[];
  not?: EngineCondition;
  fact?: string;
  path?: string;
  params?: Record<string, unknown>;
  value?: unknown;
  priority?: number | string;
}
interface EngineOfRule {
  operators: { get(name: string): { evaluate(factValue: unknown, value: unknown): unknown } | null | undefined };
  getFact(name: string): { priority?: number; calculate(params: Record<string, unknown>, almanac: Almanac): unknown } | undefined;
}

/**
 * `Rule#evaluate`'s walk, synchronous, for conditions whose facts are all at
 * hand (json-rules-engine 7: rule.js `evaluate`, condition.js `evaluate`,
 * almanac.js `factValue`/`getValue`): a group of one condition is that
 * condition; a larger group is split into sets by priority (a condition's
 * own, else its fact's, else 1), highest first, each set evaluated whole,
 * and the sets after the one that decided the group are skipped (their
 * conditions get no result); an empty group passes. A fact read with a path
 * is resolved only when it is an object. Returns the outcome as
 * `RuleResult.conditions` has it (each evaluated leaf with factResult,
 * valueResult and result), for `flattenConditions`; throws where the engine's
 * walk would reject (an unknown operator, an operator or a fact that throws),
 * and the caller lets the engine's walk tell which failure it reports.
 */
function evaluateLocally(root: EngineCondition, engine: EngineOfRule, almanac: EventAlmanac): { result: boolean; conditions: ConditionNode } {
  const factValue = (fact: string, params: Record<string, unknown> | undefined, path: string | undefined): unknown => {
    const definition = engine.getFact(fact);
    if (definition === undefined) return undefined; // allowUndefinedFacts
    const value = definition.calculate(params === undefined ? {} : params, almanac);
    return path && value != null && typeof value === 'object' ? resolvePath(value, path) : value;
  };
  const priorityOf = (condition: EngineCondition): number => {
    const own = Number(condition.priority);
    return own || (condition.fact === undefined ? undefined : engine.getFact(condition.fact)?.priority) || 1;
  };
  const leaf = (condition: EngineCondition, out: ConditionNode): boolean => {
    const operator = engine.operators.get(condition.operator);
    if (!operator) throw new Error(`Unknown operator: ${condition.operator}`);
    const value = condition.value as { fact?: unknown; params?: Record<string, unknown>; path?: string } | null | undefined;
    const valueResult = value != null && typeof value === 'object' && Object.hasOwn(value, 'fact')
      ? factValue(value.fact as string, value.params, value.path)
      : value;
    const factResult = factValue(condition.fact!, condition.params, condition.path);
    const result = operator.evaluate(factResult, valueResult);
    out.factResult = factResult;
    out.valueResult = valueResult;
    out.result = result as boolean;
    return result as boolean;
  };
  const group = (children: EngineCondition[], outs: ConditionNode[], operator: 'all' | 'any' | 'not'): boolean => {
    if (children.length === 0) return true;
    if (children.length === 1) return node(children[0], outs[0]);
    const sets = new Map<number, number[]>();
    children.forEach((child, i) => {
      const priority = priorityOf(child);
      const set = sets.get(priority);
      if (set) set.push(i);
      else sets.set(priority, [i]);
    });
    let decided = operator === 'all';
    for (const priority of [...sets.keys()].sort((a, b) => b - a)) {
      if (operator === 'any' ? decided : !decided) continue;
      const results = sets.get(priority)!.map((i) => node(children[i], outs[i]) === true);
      decided = operator === 'any' ? results.some(Boolean) : results.every(Boolean);
    }
    return decided;
  };
  const node = (condition: EngineCondition, out: ConditionNode): boolean => {
    let passes: boolean;
    if (condition.operator === 'all' && Array.isArray(condition.all)) passes = group(condition.all, out.all!, 'all') === true;
    else if (condition.operator === 'any' && Array.isArray(condition.any)) passes = group(condition.any, out.any!, 'any') === true;
    else if (condition.operator === 'not' && condition.not !== undefined) passes = !node(condition.not, out.not!);
    else return leaf(condition, out);
    out.result = passes;
    return passes;
  };
  const conditions = outline(root);
  return { result: node(root, conditions) === true, conditions };
}

/** The conditions' shape with what `flattenConditions` reads of a leaf not evaluated (a skipped one keeps `value`). */
function outline(condition: EngineCondition): ConditionNode {
  if (condition.operator === 'all' && Array.isArray(condition.all)) return { all: condition.all.map(outline) };
  if (condition.operator === 'any' && Array.isArray(condition.any)) return { any: condition.any.map(outline) };
  if (condition.operator === 'not' && condition.not !== undefined) return { not: outline(condition.not) };
  const { fact, path, params, operator, value } = condition;
  return { fact, path, params, operator, value };
}

/** Conditions compiled once, evaluated against one event's facts; every failure is part of the verdict. */
async function evaluateCompiled(conditions: TopLevelCondition, compiledRule: CompiledRule, facts: EventFacts, useEngine = false): Promise<Verdict> {
  const { scope, rule: engineRule, error } = compiledRule;
  if (engineRule === undefined) return { matched: false, conditions: flattenConditions(conditions), error };
  const almanac = new EventAlmanac(facts, scope);
  if (compiledRule.local && !useEngine) {
    const engine = (engineRule as unknown as { engine: EngineOfRule }).engine;
    try {
      const outcome = evaluateLocally((engineRule as unknown as { conditions: EngineCondition }).conditions, engine, almanac);
      return { matched: outcome.result, conditions: flattenConditions(outcome.conditions) };
    } catch {
      // The rule's bug (an unknown operator, a value an operator cannot take): json-rules-engine's walk below says
      // which, as it always has (of several failures, the first to settle among its promises, which no simpler
      // order reproduces).
    }
  }
  let outcome: RuleResult;
  try {
    outcome = await engineRule.evaluate(almanac);
  } catch (thrown) {
    // e.g. an unknown operator or an invalid regular expression: the rule's bug, recorded as its outcome.
    return { matched: false, conditions: flattenConditions(conditions), error: messageOf(thrown) };
  }
  const results = flattenConditions(outcome.conditions as ConditionNode, almanac.failures);
  if (almanac.failures.size > 0) {
    return { matched: false, conditions: results, error: [...almanac.failures.values()].join('; ') };
  }
  return { matched: outcome.result === true, conditions: results };
}

/**
 * `useEngine`: json-rules-engine's own walk even where the local one applies,
 * for the tests that hold the two to the same answers.
 */
export async function evaluateRule(rule: LoadedRule, facts: EventFacts, { useEngine = false }: { useEngine?: boolean } = {}): Promise<RuleEvaluation> {
  const conditions = rule.definition.conditions;
  if (conditions === undefined) return { ruleId: rule.id, ruleVersion: rule.version, matched: true, conditions: [] };
  const verdict = await evaluateCompiled(conditions, compiled(rule), facts, useEngine);
  const evaluation: RuleEvaluation = { ruleId: rule.id, ruleVersion: rule.version, matched: verdict.matched, conditions: verdict.conditions };
  if ('error' in verdict) evaluation.error = verdict.error;
  return evaluation;
}

export interface CheckResult {
  passed: boolean;
  conditions: ConditionResult[];
  error?: string;
}

const compiledChecks = new WeakMap<TopLevelCondition, CompiledRule>();

/**
 * A `check` step (SPEC 11): the same operators and condition results as a
 * rule's conditions, against facts the caller builds when the step runs (so
 * lookups are fresh). `rule` gives lookup-param templates their `rule` and
 * `now` its time zone. Compiled once per conditions object.
 */
export async function evaluateCheck(conditions: TopLevelCondition, facts: EventFacts, rule?: LoadedRule): Promise<CheckResult> {
  let compiledCheck = compiledChecks.get(conditions);
  if (compiledCheck === undefined) {
    const scope: FactScope = rule ? compiled(rule).scope : { rule: { id: 'check' } };
    compiledCheck = compileConditions(conditions, scope, `${scope.rule.id}#check`);
    compiledChecks.set(conditions, compiledCheck);
  }
  const { matched, conditions: results, error } = await evaluateCompiled(conditions, compiledCheck, facts);
  return { passed: matched && error === undefined, conditions: results, ...(error !== undefined ? { error } : {}) };
}

/** A listening rule's outcome for one event: what the live engine, the tester and the backtest all report. */
export type RuleOutcomeKind = 'matched' | 'not_matched' | 'error' | 'ignored_self_caused';

export interface RuleOutcome extends RuleEvaluation {
  rule: LoadedRule;
  outcome: RuleOutcomeKind;
}

export interface EvaluationOptions {
  /** The event is the echo of one of the engine's own actions (loop protection's chain position). */
  selfCaused?: boolean;
}

/**
 * The one evaluation of an event's listening rules. A self-caused event is
 * ignored by every rule that does not opt in with `allowSelfTriggered`; the
 * others are evaluated side by side (they share the event's facts, so each
 * lookup is made once) and reported in the order given.
 */
export async function evaluateCandidates(
  rules: readonly LoadedRule[],
  facts: EventFacts,
  { selfCaused = false }: EvaluationOptions = {},
): Promise<RuleOutcome[]> {
  return Promise.all(
    rules.map(async (rule): Promise<RuleOutcome> => {
      if (selfCaused && !rule.definition.options?.allowSelfTriggered) {
        return { rule, outcome: 'ignored_self_caused', ruleId: rule.id, ruleVersion: rule.version, matched: false, conditions: [] };
      }
      const evaluation = await evaluateRule(rule, facts);
      const outcome = evaluation.error ? 'error' : evaluation.matched ? 'matched' : 'not_matched';
      const { ruleId, ruleVersion, matched, conditions } = evaluation;
      return 'error' in evaluation
        ? { rule, outcome, ruleId, ruleVersion, matched, conditions, error: evaluation.error }
        : { rule, outcome, ruleId, ruleVersion, matched, conditions };
    }),
  );
}

/** The index's candidates for an event, evaluated as the live engine evaluates them. */
export async function evaluateEvent(
  index: RuleIndex,
  event: RuleEvent,
  facts: EventFacts,
  options: CandidateOptions & EvaluationOptions = {},
): Promise<EventEvaluation> {
  const { evaluate, excluded } = index.candidates(event, options);
  return { evaluations: await evaluateCandidates(evaluate, facts, options), excluded };
}
