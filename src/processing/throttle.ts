/**
 * `options.throttle`: at most `limit` executions of a rule per `windowSeconds`
 * per rendered key; the rest are recorded as `throttled`. The count is taken
 * inside the transaction that records the execution, under a lock on the
 * (rule, key) pair on PostgreSQL (SQLite transactions are serial already), so
 * concurrent events and replicas cannot both slip under the limit.
 */
import { MoreThan, Not, type EntityManager } from 'typeorm';
import { isoString } from '../clock.js';
import { templateContext, templateRuleOf } from '../rules/template-context.js';
import { renderString } from '../rules/template.js';
import type { DatabaseKind } from '../database/data-source.js';
import type { EventEnvelope } from '../intake/envelope.js';
import type { LoadedRule, ThrottleOptions } from '../rules/rule.types.js';
import { ExecutionEntity } from '../database/execution.entity.js';

/**
 * The rendered throttle key of a rule for an event ('' when it has no key
 * template: one window for the whole rule). `now` is in the rule's time zone,
 * as in its actions' templates.
 */
export function throttleKey(rule: LoadedRule, event: EventEnvelope, now: Date): string | null {
  const throttle = rule.definition.options?.throttle;
  if (!throttle) return null;
  if (!throttle.key) return '';
  return renderString(throttle.key, templateContext(templateRuleOf(rule), event, now), 'options.throttle.key').slice(0, 300);
}

/** The rendered `options.debounce.key` of a rule for an event; null when the rule does not debounce. */
export function debounceKey(rule: LoadedRule, event: EventEnvelope, now: Date): string | null {
  const debounce = rule.definition.options?.debounce;
  if (!debounce) return null;
  return renderString(debounce.key, templateContext(templateRuleOf(rule), event, now), 'options.debounce.key').slice(0, 300);
}

export async function overThrottle(
  manager: EntityManager,
  kind: DatabaseKind,
  ruleId: string,
  key: string,
  throttle: ThrottleOptions,
  now: Date,
): Promise<boolean> {
  if (kind === 'postgres') await manager.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`throttle:${ruleId}:${key}`]);
  const since = isoString(now.getTime() - throttle.windowSeconds * 1000);
  const recent = await manager.count(ExecutionEntity, {
    where: { ruleId, throttleKey: key, createdAt: MoreThan(since), status: Not('throttled') },
  });
  return recent >= throttle.limit;
}
