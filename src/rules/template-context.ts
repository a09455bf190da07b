/**
 * What a template sees: `event`, `rule`, `now` (in the rule's time zone) and,
 * for action params, `actions.<id>.response` of earlier actions of the same
 * execution, `facts.<name>` (the facts the rule's conditions used) and, inside
 * a forEach action, `item` and `index`. Built here only, so action params, throttle keys, lookup params
 * and every dry run render the same template the same way.
 */
import { nowFact, type NowFact } from './now.js';
import type { TemplateContext } from './template.js';
import type { LoadedRule } from './rule.types.js';

/** The rule as templates know it; `timezone` decides what `now` means. */
export interface TemplateRule {
  id: string;
  name?: string;
  timezone?: string;
}

export type EarlierActions = Readonly<Record<string, { response: unknown }>>;

/** What an execution adds to the context (SPEC 11). */
export interface ContextExtras {
  /** From factsUsedBy, stored with the execution. */
  facts?: Record<string, unknown>;
  /** Both set inside a forEach action only. */
  item?: unknown;
  index?: number;
}

export function templateRuleOf(rule: LoadedRule): TemplateRule {
  return { id: rule.id, name: rule.definition.name, timezone: rule.definition.schedule?.timezone };
}

/** `now` is an instant (shown in the rule's zone) or an already computed `now` value. */
export function templateContext(
  rule: TemplateRule,
  event: unknown,
  now: Date | NowFact,
  actions: EarlierActions = {},
  extras: ContextExtras = {},
): TemplateContext {
  const context: TemplateContext = {
    event,
    rule: { id: rule.id, name: rule.name },
    now: now instanceof Date ? nowFact(now, rule.timezone ?? 'UTC') : now,
    actions,
  };
  if (extras.facts !== undefined) context.facts = extras.facts;
  if (extras.index !== undefined) Object.assign(context, { item: extras.item, index: extras.index });
  return context;
}
