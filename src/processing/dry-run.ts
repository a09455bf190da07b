/**
 * Dry runs of rules: whether a rule listens to an event, each condition's
 * outcome, and the exact requests its actions would send. Nothing is sent,
 * stored or cached into real processing; lookups go to the service (reads only)
 * through whatever Lookups the caller passes, fresh for each event.
 */
import type { EventEnvelope } from '../intake/envelope.js';
import { renderActionRequest, simulatedResponse } from '../actions/request-renderer.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { EventFacts, type Changes, type Lookups } from '../rules/facts.js';
import { evaluateCandidates, type ConditionResult, type RuleOutcome } from '../rules/rule-evaluator.js';
import { templateContext, templateRuleOf } from '../rules/template-context.js';
import { triggerMatches } from '../rules/rule-index.js';
import type { LoadedRule } from '../rules/rule.types.js';

export interface ActionPreview {
  id?: string;
  type: string;
  request?: ServiceRequest;
  error?: { code: string; message: string };
}

export interface RuleTestResult {
  rule: string;
  version: string;
  enabled: boolean;
  listens: boolean;
  matched: boolean;
  conditions: ConditionResult[];
  error?: string;
  /** Not evaluated: the event is the engine's own echo and the rule does not allow self-triggering. */
  ignored?: 'self_caused';
  /** The requests the actions would send, in order (only when the rule matched). */
  actions: ActionPreview[];
}

export interface TestDeps {
  lookups: Lookups;
  now: Date;
  changes?: Changes;
  /** The event is an echo of the engine's own action (a stored event's chain position). */
  selfCaused?: boolean;
}

export function listensTo(rule: LoadedRule, type: string): boolean {
  return rule.triggers.some((pattern) => triggerMatches(pattern, type));
}

export async function testRule(rule: LoadedRule, event: EventEnvelope, deps: TestDeps, facts?: EventFacts): Promise<RuleTestResult> {
  const [outcome] = await evaluateCandidates([rule], facts ?? new EventFacts(event, deps), { selfCaused: deps.selfCaused });
  return testResult(outcome, event, deps.now);
}

/** A rule's outcome as a dry run reports it, with the requests it would send when it matched. */
export function testResult(outcome: RuleOutcome, event: EventEnvelope, now: Date): RuleTestResult {
  const { rule } = outcome;
  const result: RuleTestResult = {
    rule: rule.id,
    version: rule.version,
    enabled: rule.enabled,
    listens: listensTo(rule, event.type),
    matched: outcome.matched,
    conditions: outcome.conditions,
    actions: [],
  };
  if (outcome.outcome === 'ignored_self_caused') result.ignored = 'self_caused';
  if (outcome.error) result.error = outcome.error;
  if (outcome.matched) result.actions = previewActions(rule, event, now);
  return result;
}

/** Renders each action as the runner would, chaining simulated responses. */
export function previewActions(rule: LoadedRule, event: EventEnvelope, now: Date): ActionPreview[] {
  const previews: ActionPreview[] = [];
  const responses: Record<string, { response: unknown }> = {};
  const context = templateContext(templateRuleOf(rule), event, now, responses);
  for (const [position, action] of rule.definition.actions.entries()) {
    const rendered = renderActionRequest(action, context, `${rule.id}@${rule.version}#${position}`);
    const preview: ActionPreview = { type: action.type, ...(action.id ? { id: action.id } : {}) };
    previews.push(preview);
    if (!rendered.ok) {
      preview.error = { code: rendered.errorCode, message: rendered.errorMessage };
      if (!action.continueOnError) break;
      continue;
    }
    preview.request = rendered.request;
    if (action.id) responses[action.id] = { response: simulatedResponse(rendered.request, action.id) };
  }
  return previews;
}
