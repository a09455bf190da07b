/**
 * Dry runs of rules: whether a rule listens to an event, each condition's
 * outcome, and the exact requests its actions would send. Nothing is sent,
 * stored or cached into real processing; lookups go to the service (reads only)
 * through whatever Lookups the caller passes, fresh for each event.
 *
 * Steps (SPEC 11) are shown, not waited for: a delay as its rendered duration,
 * a check evaluated against the lookups of now (a check that does not pass
 * ends the preview, as it would end the execution), and a forEach action as
 * one request per item, or its too_many_items before any.
 */
import type { EventEnvelope } from '../intake/envelope.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { EventFacts, type Changes, type Lookups } from '../rules/facts.js';
import { evaluateCandidates, type ConditionResult, type RuleOutcome } from '../rules/rule-evaluator.js';
import { triggerMatches } from '../rules/rule-index.js';
import type { LoadedRule, RuleAction } from '../rules/rule.types.js';
import { renderActionRequest, simulatedResponse } from '../actions/request-renderer.js';
import { renderDuration } from '../rules/duration.js';
import { factsUsedBy } from '../rules/facts-used.js';
import { MAX_FOREACH_ITEMS_DEFAULT, resolveForEach } from '../rules/for-each.js';
import { evaluateCheck } from '../rules/rule-evaluator.js';
import { templateContext, templateRuleOf, type ContextExtras, type EarlierActions } from '../rules/template-context.js';
import type { TemplateContext } from '../rules/template.js';

export interface ActionPreview {
  id?: string;
  type: string;
  request?: ServiceRequest;
  error?: { code: string; message: string };
  /** A delay step: the duration as rendered (`waits PT72H`) and its length. */
  delay?: { duration: string; ms: number };
  /** A check step, evaluated against the lookups of now. */
  check?: { passed: boolean; conditions: ConditionResult[]; error?: string };
  /** A forEach action: one rendered request (or error) per item, in order. */
  items?: ItemPreview[];
}

export interface ItemPreview {
  index: number;
  request?: ServiceRequest;
  error?: { code: string; message: string };
}

export interface PreviewOptions {
  /** The event's facts, shared with the conditions' evaluation (lookups made once); default: facts that cannot look anything up. */
  facts?: EventFacts;
  /** MAX_FOREACH_ITEMS; default 100. */
  maxForEachItems?: number;
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
  /** MAX_FOREACH_ITEMS; default 100. */
  maxForEachItems?: number;
}

export function listensTo(rule: LoadedRule, type: string): boolean {
  return rule.triggers.some((pattern) => triggerMatches(pattern, type));
}

export async function testRule(rule: LoadedRule, event: EventEnvelope, deps: TestDeps, facts?: EventFacts): Promise<RuleTestResult> {
  const eventFacts = facts ?? new EventFacts(event, deps);
  const [outcome] = await evaluateCandidates([rule], eventFacts, { selfCaused: deps.selfCaused });
  return testResult(outcome, event, deps.now, { facts: eventFacts, maxForEachItems: deps.maxForEachItems });
}

/** A rule's outcome as a dry run reports it, with the requests it would send when it matched. */
export async function testResult(outcome: RuleOutcome, event: EventEnvelope, now: Date, options: PreviewOptions = {}): Promise<RuleTestResult> {
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
  if (outcome.matched) result.actions = await previewActions(rule, event, now, options);
  return result;
}

/** Renders each entry as the runner would, chaining simulated responses; steps are shown, not waited for. */
export async function previewActions(rule: LoadedRule, event: EventEnvelope, now: Date, options: PreviewOptions = {}): Promise<ActionPreview[]> {
  const facts = options.facts ?? new EventFacts(event, { now, lookups: NO_LOOKUPS });
  return previewEntries(rule, event, now, facts, options.maxForEachItems ?? MAX_FOREACH_ITEMS_DEFAULT);
}

const refuse = () => Promise.reject(new Error('this preview has no access to the service'));
const NO_LOOKUPS: Lookups = { project: refuse, user: refuse, tasks: refuse };

/** What one entry's preview needs: the run so far, shared by the entries of one preview. */
interface PreviewRun {
  rule: LoadedRule;
  event: EventEnvelope;
  now: Date;
  facts: EventFacts;
  maxItems: number;
  extras: ContextExtras;
  responses: Record<string, { response: unknown }>;
}

/** Whether the entries after this one would run. */
type Continues = boolean;

async function previewEntries(rule: LoadedRule, event: EventEnvelope, now: Date, facts: EventFacts, maxItems: number): Promise<ActionPreview[]> {
  const hasFacts = rule.definition.conditions !== undefined;
  const run: PreviewRun = { rule, event, now, facts, maxItems, responses: {}, extras: hasFacts ? { facts: await factsUsedBy(rule, facts) } : {} };
  const previews: ActionPreview[] = [];
  for (const [position, action] of rule.definition.actions.entries()) {
    const preview: ActionPreview = { type: action.type, ...(action.id ? { id: action.id } : {}) };
    previews.push(preview);
    if (!(await previewEntry(run, action, position, preview))) break;
  }
  return previews;
}

function contextOf(run: PreviewRun, extras: ContextExtras = {}): TemplateContext {
  const actions: EarlierActions = run.responses;
  return templateContext(templateRuleOf(run.rule), run.event, run.now, actions, { ...run.extras, ...extras });
}

async function previewEntry(run: PreviewRun, action: RuleAction, position: number, preview: ActionPreview): Promise<Continues> {
  if (action.type === 'delay') {
    const rendered = renderDuration(action.params.duration, contextOf(run));
    if (!rendered.ok) preview.error = { code: rendered.code, message: rendered.message };
    else preview.delay = { duration: rendered.duration, ms: rendered.ms };
    return rendered.ok;
  }
  if (action.type === 'check') {
    const check = await evaluateCheck(action.conditions ?? { all: [] }, run.facts, run.rule);
    preview.check = check;
    return check.passed;
  }
  const cacheKey = `${run.rule.id}@${run.rule.version}#${position}`;
  const ok = action.forEach === undefined ? previewRequest(run, action, cacheKey, preview) : await previewItems(run, action, cacheKey, preview);
  return ok || action.continueOnError === true;
}

function previewRequest(run: PreviewRun, action: RuleAction, cacheKey: string, preview: ActionPreview): boolean {
  const rendered = renderActionRequest(action, contextOf(run), cacheKey);
  if (!rendered.ok) {
    preview.error = { code: rendered.errorCode, message: rendered.errorMessage };
    return false;
  }
  preview.request = rendered.request;
  if (action.id) run.responses[action.id] = { response: simulatedResponse(rendered.request, action.id) };
  return true;
}

/** One request per item, each rendered with its `item` and `index`; more than the limit: nothing at all. */
async function previewItems(run: PreviewRun, action: RuleAction, cacheKey: string, preview: ActionPreview): Promise<boolean> {
  const resolved = await resolveForEach(action.forEach!, contextOf(run), run.facts, run.maxItems);
  if (!resolved.ok) {
    preview.error = { code: resolved.code, message: resolved.message };
    return false;
  }
  const responses: unknown[] = [];
  preview.items = resolved.items.map((item, index): ItemPreview => {
    const rendered = renderActionRequest(action, contextOf(run, { item, index }), cacheKey);
    if (!rendered.ok) return { index, error: { code: rendered.errorCode, message: rendered.errorMessage } };
    responses.push(simulatedResponse(rendered.request, `${action.id ?? 'item'}-${index}`));
    return { index, request: rendered.request };
  });
  // A later action reads a forEach action's response as the list of its items' responses.
  if (action.id) run.responses[action.id] = { response: responses };
  return preview.items.every((item) => item.error === undefined);
}
