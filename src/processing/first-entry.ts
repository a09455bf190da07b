/**
 * The first run of a new execution, written in the commit of its event
 * (event-commit.ts). Most often the first action: its request is rendered
 * here from the event in hand and stored with the run (it is sent unchanged
 * on every attempt), and when it names the resource it will change, that
 * resource's provenance is recorded in the same commit. A debounced rule
 * first waits (`options.debounce.seconds`), as does a rule that starts with a
 * `delay`: those runs are due when the wait ends and the execution is
 * `waiting` meanwhile. A `check` or a `forEach` action is left to the runner,
 * which evaluates or expands it when it is reached.
 */
import { touchedResource } from '../actions/action-types.js';
import { renderActionRequest } from '../actions/request-renderer.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import type { CausalScope } from '../causal-scope.js';
import { isoAfter } from '../clock.js';
import type { Statements } from '../database/statements.js';
import type { EventEnvelope } from '../intake/envelope.js';
import { renderDuration } from '../rules/duration.js';
import { isStep } from '../rules/rule.types.js';
import { templateContext } from '../rules/template-context.js';
import { saveProvenance } from './execution-progress.js';
import { actionRunId } from './new-action-run.js';
import type { ClaimedActionRun, ClaimedEvent, HandOff, LoadedExecution, VerdictMatch } from './work.js';
import type { RuleSnapshot } from './rule-snapshot.js';

/** Position of the wait a debounced execution starts with, before its first entry. */
export const DEBOUNCE_POSITION = -1;

export interface FirstEntry {
  position: number;
  /** When the execution waits first: the run is due then. */
  resumeAt: string | null;
  debounceKey: string | null;
  /** JSON stored on the run: the rendered request, or `{resume_at}` of a wait. */
  request: string | null;
  /** The rendered request `request` was written from (not a wait's). */
  rendered?: ServiceRequest;
  scope?: CausalScope;
  /** The request, when it names the resource it changes: that resource's provenance is recorded now. */
  targeting?: ServiceRequest;
}

export const FIRST_RUN_COLUMNS = [
  'id', 'execution_id', 'event_seq', 'resource_key', 'rule_id', 'position', 'action_id', 'type', 'status',
  'attempts', 'next_attempt_at', 'lease_owner', 'lease_until', 'request', 'created_at', 'updated_at', 'scope_kind', 'scope_parent',
];
/** Their PostgreSQL types, for a batch written with unnest() (event-commit.ts). */
export const FIRST_RUN_TYPES = ['text', 'text', 'int', 'text', 'text', 'int', 'text', 'text', 'text', 'int', ...Array<string>(8).fill('text')];
export const INSERT_FIRST_RUN = `INSERT INTO action_runs (${FIRST_RUN_COLUMNS.join(', ')}) VALUES (${FIRST_RUN_COLUMNS.map(() => '?').join(', ')})`;

/** The templates' context of a new execution's first entry (built only when the entry renders a template). */
function contextOf(snapshot: RuleSnapshot, envelope: EventEnvelope, now: string, match: VerdictMatch) {
  return templateContext(snapshot, envelope, new Date(now), {}, { facts: match.facts });
}

/** What a new execution starts with. */
export function firstEntryOf(
  { match, snapshot }: { match: VerdictMatch; snapshot: RuleSnapshot },
  envelope: EventEnvelope | undefined,
  now: string,
  dryRun: boolean,
): FirstEntry {
  if (snapshot.debounceSeconds !== undefined && match.debounceKey != null) {
    const resumeAt = isoAfter(new Date(now), snapshot.debounceSeconds * 1000);
    return { position: DEBOUNCE_POSITION, resumeAt, debounceKey: match.debounceKey, request: JSON.stringify({ resume_at: resumeAt }) };
  }
  const entry = snapshot.actions[0]!;
  const none: FirstEntry = { position: 0, resumeAt: null, debounceKey: null, request: null };
  if (entry.type === 'delay') {
    if (!envelope) return none;
    // A duration that cannot be rendered is left to the runner, which records why it failed.
    const duration = renderDuration(entry.params?.duration, contextOf(snapshot, envelope, now, match));
    if (!duration.ok) return none;
    const resumeAt = isoAfter(new Date(now), duration.ms);
    return { position: 0, resumeAt, debounceKey: null, request: JSON.stringify({ resume_at: resumeAt }) };
  }
  if (isStep(entry.type) || entry.forEach !== undefined || !envelope) return none;
  const rendered = renderActionRequest(entry, contextOf(snapshot, envelope, now, match), `${snapshot.id}@${snapshot.version}#0`);
  // A request that cannot be rendered is left to the runner, which records why it failed.
  if (!rendered.ok) return none;
  // Written out, not spread from `none`: this runs for every execution.
  return {
    position: 0,
    resumeAt: null,
    debounceKey: null,
    request: JSON.stringify(rendered.request),
    rendered: rendered.request,
    // A creating request's scope is on the run before it can be sent: the claim's causal barrier reads it.
    scope: dryRun ? undefined : rendered.request.createsIn,
    targeting: dryRun || rendered.request.targetId === undefined ? undefined : rendered.request,
  };
}

/** Inserts the first run, leased to `handOff` when given (this process performs it at once). */
export async function insertFirstRun(
  sql: Statements,
  claim: ClaimedEvent,
  execution: LoadedExecution,
  start: FirstEntry,
  now: string,
  handOff?: HandOff,
): Promise<ClaimedActionRun> {
  const waits = start.position === DEBOUNCE_POSITION;
  const entry = waits ? undefined : execution.rule.actions[start.position];
  const type = entry?.type ?? 'delay';
  const resourceKey = isStep(type) ? null : claim.resource_key;
  const run: ClaimedActionRun = {
    id: actionRunId({ seq: claim.seq, id: claim.event_id }, execution.ruleId, start.position), execution_id: execution.id, event_seq: claim.seq, resource_key: resourceKey,
    rule_id: execution.ruleId, position: start.position, action_id: entry?.id ?? null, type, attempts: handOff ? 1 : 0, request: start.request,
    item_index: null, item: null,
  };
  // Handed over to this process: its runner sends the object the JSON was written from instead of parsing it back.
  if (handOff && start.rendered !== undefined) run.rendered = start.rendered;
  await sql.run(INSERT_FIRST_RUN, [
    run.id, execution.id, claim.seq, resourceKey, execution.ruleId, start.position, run.action_id, type, handOff ? 'running' : 'pending',
    run.attempts, start.resumeAt ?? now, handOff?.owner ?? null, handOff?.until ?? null, run.request, now, now,
    start.scope?.kind ?? null, start.scope?.parent ?? null,
  ]);
  if (start.targeting !== undefined) await saveProvenance(sql, run, touchedResource(type, start.targeting, null), now, execution.eventDepth);
  return run;
}
