/**
 * The parts of an event's evaluation that are plain functions of what it was
 * evaluated on (EventProcessor): a rule's entry in the event's explanation,
 * the resource the event is about, and whether a rule's actions read the
 * facts its conditions used.
 */
import type { EventEnvelope } from '../intake/envelope.js';
import type { RuleOutcome } from '../rules/rule-evaluator.js';
import type { LoadedRule } from '../rules/rule.types.js';
import type { RuleExplanation } from './work.js';

/** A rule's outcome as the event's explanation stores it: the outcome's fields in their order, then the rule's id. */
export function explanationOf({ outcome, ruleId, ruleVersion, matched, conditions, error, rule }: RuleOutcome): RuleExplanation {
  // An error sits after `conditions` and before `rule`, where the outcome had it.
  if (error !== undefined) return { outcome, ruleId, ruleVersion, matched, conditions, error, rule: rule.id };
  return { outcome, ruleId, ruleVersion, matched, conditions, rule: rule.id };
}

export function resourceOf(envelope: EventEnvelope, resourceKey: string | null): Record<string, unknown> | undefined {
  if (!resourceKey) return undefined;
  const kind = resourceKey.slice(0, resourceKey.indexOf(':'));
  return envelope.data?.[kind] as Record<string, unknown> | undefined;
}

const readsFactsCache = new WeakMap<LoadedRule, boolean>();

/** Whether the rule's actions read `facts.<name>`: only then are the facts' values kept with its executions. */
export function readsFacts(rule: LoadedRule): boolean {
  let reads = readsFactsCache.get(rule);
  if (reads === undefined) readsFactsCache.set(rule, (reads = /\bfacts\b/.test(JSON.stringify(rule.definition.actions))));
  return reads;
}
