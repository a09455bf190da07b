/**
 * Dry runs of rules: whether a rule listens to an event, each condition's
 * outcome, and the exact requests its actions would send. Nothing is sent,
 * stored or cached into real processing; lookups go to the service (reads only)
 * through whatever Lookups the caller passes, fresh for each event.
 */
import type { EventEnvelope } from '../intake/envelope.js';
import { renderActionRequest, simulatedResponse } from '../actions/request-renderer.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { EventFacts, nowFact, type Changes, type Lookups } from '../rules/facts.js';
import { evaluateRule, type ConditionResult } from '../rules/rule-evaluator.js';
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
  /** The requests the actions would send, in order (only when the rule matched). */
  actions: ActionPreview[];
}

export interface TestDeps {
  lookups: Lookups;
  now: Date;
  changes?: Changes;
}

export function listensTo(rule: LoadedRule, type: string): boolean {
  return rule.triggers.some((pattern) => triggerMatches(pattern, type));
}

export async function testRule(rule: LoadedRule, event: EventEnvelope, deps: TestDeps, facts?: EventFacts): Promise<RuleTestResult> {
  const base = { rule: rule.id, version: rule.version, enabled: rule.enabled, listens: listensTo(rule, event.type) };
  const evaluation = await evaluateRule(rule, facts ?? new EventFacts(event, deps));
  const result: RuleTestResult = { ...base, matched: evaluation.matched, conditions: evaluation.conditions, actions: [] };
  if (evaluation.error) result.error = evaluation.error;
  if (evaluation.matched) result.actions = previewActions(rule, event, deps.now);
  return result;
}

/** Renders each action as the runner would, chaining simulated responses. */
export function previewActions(rule: LoadedRule, event: EventEnvelope, now: Date): ActionPreview[] {
  const previews: ActionPreview[] = [];
  const responses: Record<string, { response: unknown }> = {};
  const context = {
    event,
    rule: { id: rule.id, name: rule.definition.name },
    now: nowFact(now, rule.definition.schedule?.timezone ?? 'UTC'),
    actions: responses,
  };
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
