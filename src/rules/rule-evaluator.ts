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
 * walked synchronously instead (local-walk.ts), and when every rule an event
 * meets is one, the event's evaluation makes no promise at all
 * (`evaluateCandidatesNow`); json-rules-engine's own walk stays for rules with
 * lookups and to report a rule's failure.
 */
import { Engine, Rule, type Almanac, type RuleResult, type TopLevelCondition as JreCondition } from 'json-rules-engine';
import {
  EventAlmanac, FACT_NAMES, isRemoteFact, LOCAL_FACT_PRIORITY, LocalFacts, REMOTE_FACT_PRIORITY, RULE_FACTS,
  type EventFacts, type FactScope, type RuleEvent,
} from './facts.js';
import { flattenConditions, type ConditionNode, type ConditionResult } from './condition-results.js';
import { onlyFactsAndGroups, walkLocally, type CompiledEngineRule } from './local-walk.js';
import { addExtraOperators } from './operators.js';
import type { CandidateOptions, ExcludedRule, RuleIndex } from './rule-index.js';
import type { Condition, ConditionLeaf, LoadedRule, TopLevelCondition } from './rule.types.js';


export { flattenConditions, type ConditionResult } from './condition-results.js';

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
  /** No lookup anywhere in the conditions: `walkLocally` may walk them. */
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
  const used = [...factsUsed(conditions, new Set())];
  const unknown = used.filter((fact) => !FACT_NAMES.has(fact));
  if (unknown.length > 0) {
    const known = [...FACT_NAMES].join(', ');
    return { scope, error: `unknown fact ${unknown.map((fact) => `"${fact}"`).join(', ')} (facts are: ${known})` };
  }
  try {
    return { scope, rule: buildRule(conditions, name), local: !used.some(isRemoteFact) && onlyFactsAndGroups(conditions) };
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

/** Whether the rule's conditions are walked by `walkLocally` (they read no lookup) rather than by json-rules-engine. */
export function evaluatedLocally(rule: LoadedRule): boolean {
  return compiled(rule).local === true;
}

/** Compiles rules ahead of their first event (otherwise done lazily, once per LoadedRule). */
export function compileRules(rules: readonly LoadedRule[]): void {
  for (const rule of rules) compiled(rule);
}


type Verdict = Pick<RuleEvaluation, 'matched' | 'conditions' | 'error'>;

/**
 * The verdict, made at once, of conditions that read no lookup (the local walk), or of a rule that cannot be
 * evaluated at all; undefined when json-rules-engine's walk must make it: a lookup, or the rule's bug (an unknown
 * operator, a value an operator cannot take), which that walk names as it always has (of several failures, the first
 * to settle among its promises, which no simpler order reproduces).
 */
function verdictNow(conditions: TopLevelCondition, compiledRule: CompiledRule, facts: EventFacts): Verdict | undefined {
  const { scope, rule: engineRule, error } = compiledRule;
  if (engineRule === undefined) return { matched: false, conditions: flattenConditions(conditions), error };
  if (!compiledRule.local) return undefined;
  try {
    const outcome = walkLocally(engineRule as unknown as CompiledEngineRule, new LocalFacts(facts, scope));
    return { matched: outcome.result, conditions: flattenConditions(outcome.conditions) };
  } catch {
    return undefined;
  }
}

/** Conditions compiled once, evaluated against one event's facts; every failure is part of the verdict. */
async function evaluateCompiled(conditions: TopLevelCondition, compiledRule: CompiledRule, facts: EventFacts, useEngine = false): Promise<Verdict> {
  const now = useEngine ? undefined : verdictNow(conditions, compiledRule, facts);
  if (now !== undefined) return now;
  const { scope, rule: engineRule, error } = compiledRule;
  if (engineRule === undefined) return { matched: false, conditions: flattenConditions(conditions), error };
  const almanac = new EventAlmanac(facts, scope);
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
  return evaluationOf(rule, await evaluateCompiled(conditions, compiled(rule), facts, useEngine));
}

/** `evaluateRule`'s answer, made at once (no promise), when `verdictNow` can make it; undefined otherwise. */
function evaluateRuleNow(rule: LoadedRule, facts: EventFacts): RuleEvaluation | undefined {
  const conditions = rule.definition.conditions;
  if (conditions === undefined) return { ruleId: rule.id, ruleVersion: rule.version, matched: true, conditions: [] };
  const verdict = verdictNow(conditions, compiled(rule), facts);
  return verdict === undefined ? undefined : evaluationOf(rule, verdict);
}

function evaluationOf(rule: LoadedRule, verdict: Verdict): RuleEvaluation {
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
    rules.map(async (rule): Promise<RuleOutcome> => (ignoresSelfCaused(rule, selfCaused) ? ignored(rule) : outcomeOf(rule, await evaluateRule(rule, facts)))),
  );
}

/**
 * `evaluateCandidates`' answer, made at once, when every rule's is (no rule reads a lookup or fails: `verdictNow`);
 * undefined otherwise. The rules are then walked one after the other, each on facts at hand, so the answers are those
 * of walks side by side. For the live engine, which evaluates every event: a promise or two for each rule an event
 * meets, and an Almanac, cost it about as much as the walk.
 */
export function evaluateCandidatesNow(rules: readonly LoadedRule[], facts: EventFacts, { selfCaused = false }: EvaluationOptions = {}): RuleOutcome[] | undefined {
  // A rule with a lookup sends them all to the async walk: found before any is walked, so none is walked twice.
  if (rules.some((rule) => !ignoresSelfCaused(rule, selfCaused) && needsEngineWalk(rule))) return undefined;
  const outcomes: RuleOutcome[] = [];
  for (const rule of rules) {
    if (ignoresSelfCaused(rule, selfCaused)) {
      outcomes.push(ignored(rule));
      continue;
    }
    const evaluation = evaluateRuleNow(rule, facts);
    if (evaluation === undefined) return undefined;
    outcomes.push(outcomeOf(rule, evaluation));
  }
  return outcomes;
}

/** Its conditions read a lookup: only json-rules-engine's walk evaluates them. */
function needsEngineWalk(rule: LoadedRule): boolean {
  if (rule.definition.conditions === undefined) return false;
  const { rule: engineRule, local } = compiled(rule);
  return engineRule !== undefined && local !== true;
}

function ignoresSelfCaused(rule: LoadedRule, selfCaused: boolean): boolean {
  return selfCaused && !rule.definition.options?.allowSelfTriggered;
}

function ignored(rule: LoadedRule): RuleOutcome {
  return { rule, outcome: 'ignored_self_caused', ruleId: rule.id, ruleVersion: rule.version, matched: false, conditions: [] };
}

function outcomeOf(rule: LoadedRule, evaluation: RuleEvaluation): RuleOutcome {
  const outcome = evaluation.error ? 'error' : evaluation.matched ? 'matched' : 'not_matched';
  const { ruleId, ruleVersion, matched, conditions } = evaluation;
  return 'error' in evaluation
    ? { rule, outcome, ruleId, ruleVersion, matched, conditions, error: evaluation.error }
    : { rule, outcome, ruleId, ruleVersion, matched, conditions };
}

/** The index's candidates for an event, evaluated as the live engine evaluates them. */
export async function evaluateEvent(
  index: RuleIndex,
  event: RuleEvent,
  facts: EventFacts,
  options: CandidateOptions & EvaluationOptions = {},
): Promise<EventEvaluation> {
  const { evaluate, excluded } = index.candidates(event, options);
  return { evaluations: evaluateCandidatesNow(evaluate, facts, options) ?? (await evaluateCandidates(evaluate, facts, options)), excluded };
}
