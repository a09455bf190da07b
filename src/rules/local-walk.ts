/**
 * json-rules-engine's walk of a rule's conditions (`Rule#evaluate`),
 * synchronous, for rules whose conditions read no lookup: their facts
 * (`event`, `changes`, `now`) are at hand, so nothing needs waiting for.
 *
 * Why: json-rules-engine makes a promise for every condition and every fact,
 * and deep-copies the conditions for each result. With this walk the engine's
 * main thread does about 5 % less work per event for the benchmark's
 * one-condition rule (instructions per event, `npm run bench:instructions`:
 * 1.22 → 1.16 M, session 21).
 *
 * The walk is json-rules-engine 7's, over the same compiled conditions, with
 * the same operators and facts (rule.js `evaluate`, condition.js `evaluate`,
 * almanac.js `factValue` and `getValue`): a group of one condition is that
 * condition; an empty group passes; a larger group is split into sets by
 * priority (a condition's own, else its fact's, else 1), highest first, each
 * set evaluated whole, and the sets after the one that decided the group are
 * skipped (their conditions get no result). A fact read with a path is
 * resolved only when it is an object. Where json-rules-engine's walk would
 * fail (an unknown operator, an operator or a fact that throws), this one
 * throws, and the caller (rule-evaluator.ts) runs json-rules-engine's walk,
 * which reports the failure as it always has: of several, the first of its
 * promises to settle, an order no simpler walk reproduces. A property test
 * (rule-evaluator.spec.ts) holds the two walks to the same answers.
 */
import type { ConditionNode } from './condition-results.js';
import { resolvePath, type LocalFacts } from './facts.js';
import type { Condition, ConditionLeaf } from './rule.types.js';

/** json-rules-engine's Condition, as much of it as the walk reads. */
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
  /** A rule fact (facts.ts RULE_FACTS) calculates from a LocalFacts as from an EventAlmanac, lookups excepted. */
  getFact(name: string): { priority?: number; calculate(params: Record<string, unknown>, almanac: LocalFacts): unknown } | undefined;
}

/** A compiled json-rules-engine Rule: its conditions and the Engine it was added to. */
export interface CompiledEngineRule {
  conditions: EngineCondition;
  engine: EngineOfRule;
}

/** Every node an all/any/not group or a leaf with a fact (no named condition reference): what the walk knows. */
export function onlyFactsAndGroups(condition: Condition): boolean {
  if ('all' in condition) return Array.isArray(condition.all) && condition.all.every(onlyFactsAndGroups);
  if ('any' in condition) return Array.isArray(condition.any) && condition.any.every(onlyFactsAndGroups);
  if ('not' in condition) return !Array.isArray(condition.not) && onlyFactsAndGroups(condition.not);
  return typeof (condition as Partial<ConditionLeaf>).fact === 'string';
}

/** The rule's outcome and its conditions as `RuleResult.conditions` has them (each evaluated leaf with its results). */
export function walkLocally(rule: CompiledEngineRule, facts: LocalFacts): { result: boolean; conditions: ConditionNode } {
  const conditions = outline(rule.conditions);
  const result = new LocalWalk(rule.engine, facts).node(rule.conditions, conditions);
  return { result: result === true, conditions };
}

class LocalWalk {
  constructor(
    private readonly engine: EngineOfRule,
    private readonly facts: LocalFacts,
  ) {}

  node(condition: EngineCondition, out: ConditionNode): boolean {
    let passes: boolean;
    if (condition.operator === 'all' && Array.isArray(condition.all)) passes = this.group(condition.all, out.all!, 'all') === true;
    else if (condition.operator === 'any' && Array.isArray(condition.any)) passes = this.group(condition.any, out.any!, 'any') === true;
    else if (condition.operator === 'not' && condition.not !== undefined) passes = !this.node(condition.not, out.not!);
    else return this.leaf(condition, out);
    out.result = passes;
    return passes;
  }

  private group(children: EngineCondition[], outs: ConditionNode[], operator: 'all' | 'any'): boolean {
    if (children.length === 0) return true;
    if (children.length === 1) return this.node(children[0], outs[0]);
    let decided = operator === 'all';
    for (const set of this.bySet(children)) {
      if (operator === 'any' ? decided : !decided) continue; // decided by an earlier set: this one is not evaluated
      const results = set.map((i) => this.node(children[i], outs[i]) === true);
      decided = operator === 'any' ? results.some(Boolean) : results.every(Boolean);
    }
    return decided;
  }

  /** The children's indexes grouped by priority, highest first. */
  private bySet(children: EngineCondition[]): number[][] {
    const sets = new Map<number, number[]>();
    children.forEach((child, i) => {
      const own = Number(child.priority);
      const priority = own || (child.fact === undefined ? undefined : this.engine.getFact(child.fact)?.priority) || 1;
      const set = sets.get(priority);
      if (set) set.push(i);
      else sets.set(priority, [i]);
    });
    return [...sets.keys()].sort((a, b) => b - a).map((priority) => sets.get(priority)!);
  }

  private leaf(condition: EngineCondition, out: ConditionNode): boolean {
    const operator = this.engine.operators.get(condition.operator);
    if (!operator) throw new Error(`Unknown operator: ${condition.operator}`);
    const value = condition.value as { fact?: unknown; params?: Record<string, unknown>; path?: string } | null | undefined;
    const valueResult = value != null && typeof value === 'object' && Object.hasOwn(value, 'fact')
      ? this.factValue(value.fact as string, value.params, value.path)
      : value;
    const factResult = this.factValue(condition.fact!, condition.params, condition.path);
    const result = operator.evaluate(factResult, valueResult) as boolean;
    out.factResult = factResult;
    out.valueResult = valueResult;
    out.result = result;
    return result;
  }

  private factValue(fact: string, params: Record<string, unknown> | undefined, path: string | undefined): unknown {
    const definition = this.engine.getFact(fact);
    if (definition === undefined) return undefined; // allowUndefinedFacts
    const value = definition.calculate(params === undefined ? {} : params, this.facts);
    return path && value != null && typeof value === 'object' ? resolvePath(value, path) : value;
  }
}

/** The conditions' shape, each leaf with what `flattenConditions` reports of one not evaluated (its `value`). */
function outline(condition: EngineCondition): ConditionNode {
  if (condition.operator === 'all' && Array.isArray(condition.all)) return { all: condition.all.map(outline) };
  if (condition.operator === 'any' && Array.isArray(condition.any)) return { any: condition.any.map(outline) };
  if (condition.operator === 'not' && condition.not !== undefined) return { not: outline(condition.not) };
  const { fact, path, params, operator, value } = condition;
  return { fact, path, params, operator, value };
}
