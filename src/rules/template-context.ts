/**
 * What a template sees: `event`, `rule`, `now` (in the rule's time zone) and,
 * for action params, `actions.<id>.response` of earlier actions of the same
 * execution. Built here only, so action params, throttle keys, lookup params
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

export function templateRuleOf(rule: LoadedRule): TemplateRule {
  return { id: rule.id, name: rule.definition.name, timezone: rule.definition.schedule?.timezone };
}

/** `now` is an instant (shown in the rule's zone) or an already computed `now` value. */
export function templateContext(rule: TemplateRule, event: unknown, now: Date | NowFact, actions: EarlierActions = {}): TemplateContext {
  return {
    event,
    rule: { id: rule.id, name: rule.name },
    now: now instanceof Date ? nowFact(now, rule.timezone ?? 'UTC') : now,
    actions,
  };
}
