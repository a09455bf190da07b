/**
 * Turns what the demo observed (the engine's account of each event from
 * `GET /admin/events/:id`, and the webhooks the simulator sent) into readable
 * chains: event → rule → request → answer → the webhook the service sent back
 * → what the engine did with that one, and so on. Pure: no I/O, so it is easy
 * to test and to reuse.
 */
import type { WebhookLogEntry } from '../simulator/simulator.js';
import type { Colors } from '../cli/cli-output.js';

/** The parts of the admin API's event view the demo reads. */
export interface AdminCondition {
  fact: string;
  path?: string;
  params?: Record<string, unknown>;
  operator: string;
  value: unknown;
  factValue?: unknown;
  result: boolean;
  group?: string;
  skipped?: boolean;
  error?: string;
}

export interface AdminRuleOutcome {
  rule: string;
  outcome: string;
  conditions?: AdminCondition[];
  error?: string;
  execution?: string;
}

export interface AdminActionRun {
  type: string;
  status: string;
  request: { method: string; path: string; body?: unknown } | null;
  response_status: number | null;
  response: unknown;
  error: { code: string; message: string | null } | null;
  attempts?: number;
}

export interface AdminExecution {
  id?: string;
  rule: string;
  status: string;
  error?: string | null;
  actions: AdminActionRun[];
}

export interface AdminEvent {
  id: string;
  type: string;
  status: string;
  error?: string | null;
  rules: AdminRuleOutcome[];
  executions: AdminExecution[];
}

/** One event the engine received as the direct result of a story step. */
export interface Trigger {
  eventId: string;
  type: string;
}

export interface StepRecord {
  title: string;
  /** What was done, e.g. the request made at the simulator and its status. */
  how: string;
  triggers: Trigger[];
  /** The engine's view of every event of the step, by event id. */
  events: ReadonlyMap<string, AdminEvent>;
  /** Webhooks the simulator sent during the step, oldest first. */
  webhooks: readonly WebhookLogEntry[];
  /** What the step was expected to change at the service, and whether it did. */
  checks: Array<{ ok: boolean; text: string }>;
}

const MAX_JSON = 110;

export function shortJson(value: unknown, max = MAX_JSON): string {
  const text = value === undefined ? 'undefined' : JSON.stringify(value);
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** A fact's value in a few words: a list of resources by their ids, anything else as short JSON. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (undefined)';
  if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof (v as { id?: unknown })?.id === 'string')) {
    const ids = value.map((v) => (v as { id: string }).id);
    const shown = ids.length > 4 ? `${ids.slice(0, 4).join(', ')}, … ${ids.length} in all` : ids.join(', ');
    return `[${shown}]`;
  }
  return shortJson(value, 80);
}

/** Inside an odd number of `not`s a condition must fail for its rule to match. */
function negated(group: string | undefined): boolean {
  return (group ?? '').split('.').filter((step) => step === 'not').length % 2 === 1;
}

/** Operators whose value is ignored (SPEC 5: write `true`). */
const UNARY = new Set(['isEmpty', 'isNotEmpty']);

/** `changes $.status.to equal "blocked", actual "completed"`; a lookup shows its parameter names: `tasks(project_id)`. */
export function conditionText(c: AdminCondition): string {
  const fact = c.params === undefined ? c.fact : `${c.fact}(${Object.keys(c.params).join(', ')})`;
  const subject = c.path === undefined ? fact : `${fact} ${c.path}`;
  const expected = UNARY.has(c.operator) ? '' : ` ${shortJson(c.value, 60)}`;
  const test = `${negated(c.group) ? 'not ' : ''}${subject} ${c.operator}${expected}`;
  return c.error ? `${test}: ${c.error}` : `${test}, actual ${describeValue(c.factValue)}`;
}

/** The conditions that decided a non-match: those evaluated with the outcome the rule did not want. */
export function failingConditions(conditions: readonly AdminCondition[] = []): AdminCondition[] {
  const evaluated = conditions.filter((c) => !c.skipped);
  const deciding = evaluated.filter((c) => c.result === negated(c.group) || c.error !== undefined);
  return deciding.length > 0 ? deciding : evaluated;
}

/** `ignored (1 rule listened, none matched)`, `processed (2 of 3 rules matched)`. */
export function eventOutcome(event: AdminEvent): string {
  const listened = event.rules.length;
  // A throttled rule did match; its actions were held back.
  const matched = event.rules.filter((r) => r.outcome === 'matched' || r.outcome === 'throttled').length;
  let detail: string;
  if (listened === 0) detail = `no rule listens to ${event.type}`;
  else if (matched === 0) detail = `${listened === 1 ? '1 rule' : `${listened} rules`} listened, none matched`;
  else detail = `${matched} of ${listened} ${listened === 1 ? 'rule' : 'rules'} matched`;
  return `${event.status} (${detail}${event.error ? `; ${event.error}` : ''})`;
}

function resourceIds(event: WebhookLogEntry['event']): string[] {
  return Object.values(event.data)
    .map((v) => (v as { id?: unknown } | null)?.id)
    .filter((id): id is string => typeof id === 'string');
}

function responseId(run: AdminActionRun): string | undefined {
  const id = (run.response as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : undefined;
}

export function requestText(run: AdminActionRun): string {
  if (run.request === null) return `${run.type} (no request)`;
  const body = run.request.body === undefined ? '' : ` ${shortJson(run.request.body)}`;
  return `${run.request.method} /v1${run.request.path}${body}`;
}

export function answerText(run: AdminActionRun, paint: Colors): string {
  const id = responseId(run);
  const status = run.response_status === null ? '' : `${run.response_status} `;
  const attempts = (run.attempts ?? 1) > 1 ? ` after ${run.attempts} attempts` : '';
  if (run.status === 'succeeded') return paint.green(`${status}${id ? `(id ${id})` : 'ok'}${attempts}`.trim());
  if (run.status === 'skipped') return paint.yellow('not sent (dry run)');
  const error = run.error ? `: ${run.error.code}${run.error.message ? ` ${run.error.message}` : ''}` : '';
  const text = `${status}${run.status}${error}${attempts}`;
  return run.status === 'failed' ? paint.red(text) : paint.yellow(text);
}

/** The line for a rule that ran no actions for this event; undefined when it matched (or was throttled). */
function notRunLine(outcome: AdminRuleOutcome, paint: Colors): string | undefined {
  if (outcome.outcome === 'matched' || outcome.outcome === 'throttled') return undefined;
  if (outcome.outcome === 'not_matched') {
    const why = failingConditions(outcome.conditions).map(conditionText).join('; ');
    return `${paint.yellow('✗')} rule ${outcome.rule} did not match${why ? `: ${why}` : ''}`;
  }
  if (outcome.outcome === 'ignored_self_caused') {
    return `${paint.dim('·')} rule ${outcome.rule} not evaluated: the engine's own action caused this event (loop protection)`;
  }
  const error = outcome.error ? `: ${outcome.error}` : '';
  return `${paint.red('!')} rule ${outcome.rule} ${outcome.outcome.replace(/_/g, ' ')}${error}`;
}

/** Nothing for a succeeded execution; otherwise how it ended. */
function executionNote(execution: AdminExecution | undefined): string {
  if (execution === undefined || execution.status === 'succeeded') return '';
  const error = execution.error ?? undefined;
  if (execution.status === 'throttled') return ` → throttled by options.throttle${error ? ` (${error})` : ''}, no action run`;
  return ` → ${execution.status}${error ? `: ${error}` : ''}`;
}

function deliveryProblem(w: WebhookLogEntry): string {
  if (w.error !== undefined) return w.error;
  return w.status === undefined ? w.state : `the engine answered ${w.status} ${w.response ?? ''}`.trim();
}

/** Renders one step's chains; each webhook is shown once, under the action that caused it when known. */
export class StepRenderer {
  private readonly shown = new Set<string>();
  readonly lines: string[] = [];

  constructor(
    private readonly step: StepRecord,
    private readonly paint: Colors,
  ) {
    for (const t of step.triggers) this.shown.add(t.eventId);
  }

  render(index: number): string[] {
    const { paint, step } = this;
    this.lines.push(paint.bold(`${index}. ${step.title}`), `   ${step.how}`);
    for (const trigger of step.triggers) this.event(trigger.eventId, trigger.type, '   ', 'event', true);
    const others = step.webhooks.filter((w) => !this.shown.has(w.event.id));
    if (others.length > 0) this.lines.push(`   ${paint.dim('other webhooks the service sent meanwhile:')}`);
    for (const w of others) this.sentBack(w, '     ');
    for (const check of step.checks) {
      this.lines.push(`   ${check.ok ? paint.green(`✓ ${check.text}`) : paint.red(`✗ ${check.text}`)}`);
    }
    return this.lines;
  }

  private event(id: string, type: string, indent: string, lead: string, fullId: boolean): void {
    const shownId = this.paint.dim(fullId ? id : `${id.slice(0, 12)}…`);
    const event = this.step.events.get(id);
    if (event === undefined) {
      const webhook = this.step.webhooks.find((w) => w.event.id === id && w.state !== 'delivered');
      const why = webhook ? `not delivered: ${deliveryProblem(webhook)}` : 'no record at the engine';
      this.lines.push(`${indent}${lead} ${type} ${shownId} → ${this.paint.red(why)}`);
      return;
    }
    this.lines.push(`${indent}${lead} ${type} ${shownId} → ${eventOutcome(event)}`);
    for (const outcome of event.rules) this.rule(event, outcome, `${indent}  `);
  }

  private rule(event: AdminEvent, outcome: AdminRuleOutcome, indent: string): void {
    const line = notRunLine(outcome, this.paint);
    if (line !== undefined) {
      this.lines.push(`${indent}${line}`);
      return;
    }
    const execution =
      event.executions.find((x) => outcome.execution !== undefined && x.id === outcome.execution) ??
      event.executions.find((x) => x.rule === outcome.rule);
    this.lines.push(`${indent}${this.paint.green('✓')} rule ${outcome.rule} matched${executionNote(execution)}`);
    for (const run of execution?.actions ?? []) {
      this.lines.push(`${indent}    → ${requestText(run)} → ${answerText(run, this.paint)}`);
      const id = responseId(run);
      if (id === undefined || run.status !== 'succeeded') continue;
      for (const w of this.step.webhooks) {
        if (!this.shown.has(w.event.id) && resourceIds(w.event).includes(id)) this.sentBack(w, `${indent}        `);
      }
    }
  }

  private sentBack(w: WebhookLogEntry, indent: string): void {
    this.shown.add(w.event.id);
    this.event(w.event.id, w.event.type, indent, '↩ service sent back', false);
  }
}

export function renderStep(index: number, step: StepRecord, paint: Colors): string[] {
  return new StepRenderer(step, paint).render(index);
}
