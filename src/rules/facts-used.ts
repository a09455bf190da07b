/**
 * `facts.<name>` in templates (SPEC 11): the values of the facts a rule's
 * conditions used for the event that matched it. Read from what the
 * evaluation already holds: `changes` is computed per event, and a lookup the
 * conditions made is cached in the event's EventFacts. A lookup the conditions
 * did not need (json-rules-engine decided without it) is not made here either,
 * so that fact is absent and a template reading it fails with template_error.
 */
import { isRemoteFact, type EventFacts, type FactScope, type LookupName } from './facts.js';
import type { Condition, ConditionLeaf, LoadedRule } from './rule.types.js';

/** The facts templates may read through `facts.<name>`. */
export const TEMPLATE_FACTS: readonly string[] = ['changes', 'project', 'user', 'tasks'];

/** Every leaf of a condition tree, depth-first in the order written. */
export function conditionLeaves(condition: Condition, out: ConditionLeaf[] = []): ConditionLeaf[] {
  if ('all' in condition) condition.all.forEach((child) => conditionLeaves(child, out));
  else if ('any' in condition) condition.any.forEach((child) => conditionLeaves(child, out));
  else if ('not' in condition) conditionLeaves(condition.not, out);
  else out.push(condition);
  return out;
}

/** Fact references of a leaf: its own fact, and a `{"fact": …}` value compared with it. */
function references(leaf: ConditionLeaf): Array<{ fact: string; params?: Record<string, unknown> }> {
  const refs: Array<{ fact: string; params?: Record<string, unknown> }> = [{ fact: leaf.fact, params: leaf.params }];
  const value = leaf.value as { fact?: unknown; params?: unknown } | null;
  if (typeof value === 'object' && value !== null && typeof value.fact === 'string') {
    refs.push({ fact: value.fact, params: value.params as Record<string, unknown> | undefined });
  }
  return refs;
}

/**
 * The values of `changes`, `project`, `user` and `tasks` as the rule's
 * conditions used them for this event, by fact name. A lookup used with
 * different params in several conditions: the first one written that was made.
 * A failed lookup is left out.
 */
export async function factsUsedBy(rule: LoadedRule, facts: EventFacts): Promise<Record<string, unknown>> {
  const conditions = rule.definition.conditions;
  if (conditions === undefined) return {};
  const scope: FactScope = { rule: { id: rule.id, name: rule.definition.name }, timezone: rule.definition.schedule?.timezone };
  const used: Record<string, unknown> = {};
  for (const { fact, params } of conditionLeaves(conditions).flatMap(references)) {
    if (!TEMPLATE_FACTS.includes(fact) || Object.hasOwn(used, fact)) continue;
    if (!isRemoteFact(fact)) {
      used[fact] = facts.changes;
      continue;
    }
    const made = facts.madeLookup(fact as LookupName, params, scope);
    if (made === undefined) continue;
    try {
      used[fact] = await made;
    } catch {
      // the rule did not match with a failed lookup; nothing to expose
    }
  }
  return used;
}
