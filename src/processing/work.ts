/**
 * The shapes work takes as it moves through processing: claimed events and
 * action runs, an evaluated event on its way to its commit, and the runs a
 * commit hands to this process. Types only, so the files that pass them to one
 * another need not import each other.
 */
import type { EventStatus } from '../database/event.entity.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import type { EventEnvelope } from '../intake/envelope.js';
import type { LeasedEvent } from '../intake/event-writer.js';
import type { RuleEvaluation } from '../rules/rule-evaluator.js';
import type { LoadedRule } from '../rules/rule.types.js';
import type { ChainPosition } from './loop-guard.js';
import type { RuleSnapshot } from './rule-snapshot.js';

/** An event leased to this process, by a claim or by intake's INSERT (the same columns either way). */
export interface ClaimedEvent extends LeasedEvent {
  /**
   * SQLite: intake's commit evaluated the event and left it to the event loop (a rule matched it): that evaluation,
   * so that the loop commits it without evaluating the event again (EventProcessor.deciderAtIntake; in memory only).
   */
  evaluated?: EvaluatedAtIntake;
  /**
   * PostgreSQL: intake's evaluation of an event it leased held behind a create in flight, on what its statement found
   * (no provenance for the resource, no snapshot where the evaluation read one: `readSnapshot`). The commit of the
   * outcome that lets the event go stores it decided where that is still so (let-go-statement.ts); nothing else uses it.
   */
  heldEvaluation?: HeldEvaluation;
}

/** An evaluation at intake kept with an event held behind a create in flight (ClaimedEvent.heldEvaluation). */
export type HeldEvaluation = EvaluatedAtIntake & { readSnapshot: boolean };

/** What an evaluation in intake's commit found, for the commit of the event loop (PreparedEvent without the claim). */
export type EvaluatedAtIntake = Pick<PreparedEvent, 'verdict' | 'resource' | 'resourceKnown'>;

export interface ClaimedActionRun {
  id: string;
  execution_id: string;
  event_seq: number;
  resource_key: string | null;
  rule_id: string;
  position: number;
  action_id: string | null;
  type: string;
  attempts: number;
  /** The request as rendered when the run was created or first attempted; null until then. */
  request?: string | null;
  /** `request` as the object it was written from, when this process rendered it (a first run it handed over to itself). */
  rendered?: ServiceRequest;
  /** One item of a forEach action: its index and the item as JSON; null otherwise. */
  item_index?: number | null;
  item?: string | null;
}

/** One listening rule's outcome for an event, as `GET /admin/events/:id` shows it. */
export interface RuleExplanation extends Partial<RuleEvaluation> {
  rule: string;
  outcome: 'matched' | 'not_matched' | 'error' | 'ignored_self_caused' | 'throttled';
  execution?: string;
}

export interface VerdictMatch {
  rule: LoadedRule;
  evaluation: RuleEvaluation;
  throttleKey: string | null;
  /** The rendered `options.debounce.key` when the rule debounces. */
  debounceKey?: string | null;
  /** The values of the facts the rule's conditions used. */
  facts?: Record<string, unknown>;
}

export interface PreparedEvent {
  claim: ClaimedEvent;
  verdict: Verdict;
  resource: Record<string, unknown> | undefined;
  /** The parsed event; absent for a crash record. */
  envelope?: EventEnvelope;
  /** Rules whose `options.cancelOn` this event's type matches: their waiting executions about its resource are cancelled. */
  cancels?: string[];
  /**
   * Its resource had a snapshot when the event was evaluated, so its commit marks no event seen: every event about
   * the resource stored since the first snapshot was stored seen (event-writer.ts), and those stored before were
   * marked by the commit that saved it. (On PostgreSQL an event whose intake commit overlapped that commit may stay
   * unseen; it then waits behind a create in flight as a new resource's event does: later, never out of order.)
   */
  resourceKnown?: boolean;
}

export interface Verdict {
  status: EventStatus;
  position: ChainPosition;
  explanation: RuleExplanation[];
  matched: VerdictMatch[];
  error?: string;
  retryAt?: string;
}

/** A run's execution and the rule as it was when it matched (it never changes afterwards). */
export interface LoadedExecution {
  id: string;
  eventSeq: number;
  eventId: string;
  ruleId: string;
  rule: RuleSnapshot;
  /** The type and chain depth of the event that started it (engine events never cause engine events about themselves). */
  eventType: string;
  eventDepth: number;
  /** The values of the facts its rule's conditions used (`facts.<name>` in templates). */
  facts?: Record<string, unknown>;
}

/** Who takes new action runs at once: this process, under a lease until `until`, as many as it has room for. */
export interface HandOff {
  owner: string;
  until: string;
  /** How many more runs may be leased; counts down as they are. */
  room: number;
}

/** An action run a commit created; `leased` when it was handed to this process, which may perform it at once. */
export interface CreatedRun {
  run: ClaimedActionRun;
  execution: LoadedExecution;
  leased: boolean;
}
