/**
 * Evaluates one claimed event against the rules that listen to it and commits,
 * in one transaction guarded by the lease: the event's outcome and explanation,
 * an execution per matched rule with its first action run (or `throttled`), and
 * the resource snapshot the next event's `changes` will be computed from.
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { In, type EntityManager } from 'typeorm';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { newActionRun } from './new-action-run.js';
import { backoffDelayMs } from '../actions/retry-policy.js';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import { CLOCK, isoIn, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { EventEntity, type EventStatus } from '../database/event.entity.js';
import { type EventEnvelope } from '../intake/envelope.js';
import { safeJsonParse } from '../json.js';
import { Metrics } from '../observability/metrics.js';
import { computeChanges, EventFacts, type Changes } from '../rules/facts.js';
import { evaluateEvent, type RuleEvaluation } from '../rules/rule-evaluator.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { chainPosition, isLoopBlocked, type ChainPosition } from './loop-guard.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import { overThrottle, throttleKey } from './throttle.js';
import type { ClaimedEvent } from './work-queue.js';

/** One listening rule's outcome for an event, as `GET /admin/events/:id` shows it. */
export interface RuleExplanation extends Partial<RuleEvaluation> {
  rule: string;
  outcome: 'matched' | 'not_matched' | 'error' | 'ignored_self_caused' | 'throttled';
  execution?: string;
}

interface Match {
  rule: LoadedRule;
  evaluation: RuleEvaluation;
  throttleKey: string | null;
}

export interface KnownResources {
  snapshots: Map<string, ResourceSnapshotEntity>;
  provenance: Map<string, ResourceProvenanceEntity>;
}

export interface PreparedEvent {
  claim: ClaimedEvent;
  verdict: Verdict;
  resource: Record<string, unknown> | undefined;
}

interface Verdict {
  status: EventStatus;
  position: ChainPosition;
  explanation: RuleExplanation[];
  matched: Match[];
  error?: string;
  retryAt?: string;
}

@Injectable()
export class EventProcessor {
  private readonly logger = new Logger('processing');

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly registry: RuleRegistry,
    private readonly client: ServiceClient,
    private readonly metrics: Metrics,
  ) {}

  /** The snapshots and provenance of the resources a batch is about, read in two queries for the whole batch. */
  async knownResources(claims: ClaimedEvent[]): Promise<KnownResources> {
    const keys = [...new Set(claims.map((c) => c.resource_key).filter((k): k is string => k !== null))];
    if (keys.length === 0) return { snapshots: new Map(), provenance: new Map() };
    const [snapshots, provenance] = await Promise.all([
      this.db.manager.findBy(ResourceSnapshotEntity, { resourceKey: In(keys) }),
      this.db.manager.findBy(ResourceProvenanceEntity, { resourceKey: In(keys) }),
    ]);
    return {
      snapshots: new Map(snapshots.map((s) => [s.resourceKey, s])),
      provenance: new Map(provenance.map((p) => [p.resourceKey, p])),
    };
  }

  /** Evaluates and commits one event; returns the number of action runs created. */
  async process(claim: ClaimedEvent, leaseOwner: string): Promise<number> {
    return this.commitAll([await this.prepare(claim)], leaseOwner);
  }

  /**
   * Commits the outcomes of several evaluated events in one transaction (a
   * claimed batch pays for one commit, not one each); an event whose lease was
   * lost is left out. Returns the number of action runs created.
   */
  async commitAll(prepared: PreparedEvent[], leaseOwner: string): Promise<number> {
    if (prepared.length === 0) return 0;
    return this.db.write(async (manager) => {
      let runs = 0;
      for (const p of prepared) runs += await this.commit(manager, p.claim, leaseOwner, p.verdict, p.resource);
      return runs;
    });
  }

  /** Everything about an event that needs no writing: lookups, loop check, rule evaluation. */
  async prepare(claim: ClaimedEvent, known?: KnownResources): Promise<PreparedEvent> {
    const envelope = safeJsonParse(claim.payload) as EventEnvelope;
    const resource = resourceOf(envelope, claim.resource_key);
    const { snapshots, provenance: provenances } = known ?? (await this.knownResources([claim]));
    const previous = claim.resource_key ? snapshots.get(claim.resource_key) : undefined;
    const provenance = (claim.resource_key && provenances.get(claim.resource_key)) || null;
    const position = chainPosition(provenance, this.clock.now());
    let verdict: Verdict;
    if (isLoopBlocked(position, this.config.maxChainDepth)) {
      this.logger.warn({ msg: 'loop blocked', event: claim.event_id, type: claim.type, resource: claim.resource_key, depth: position.depth, rule: provenance?.ruleId });
      this.metrics.loopsBlocked.inc();
      verdict = { status: 'loop_blocked', position, explanation: [], matched: [] };
    } else {
      const before = previous ? (safeJsonParse(previous.payload) as Record<string, unknown>) : undefined;
      verdict = await this.evaluate(claim, envelope, computeChanges(resource, before, envelope.data?.changes), position);
    }
    return { claim, verdict, resource };
  }

  /**
   * Something threw while handling the event (a bug, the database): record it,
   * and try again later, so one poisonous event neither spins nor blocks its
   * resource forever.
   */
  async recordCrash(claim: ClaimedEvent, leaseOwner: string, error: Error): Promise<void> {
    const verdict = this.retryOrFail(claim, { selfCaused: false, depth: claim.depth }, [], `processing failed: ${error.message}`);
    await this.db.write((manager) => this.commit(manager, claim, leaseOwner, verdict, undefined));
  }

  private async evaluate(claim: ClaimedEvent, envelope: EventEnvelope, changes: Changes, position: ChainPosition): Promise<Verdict> {
    const lookups = new ServiceLookups(this.client);
    const now = this.clock.now();
    const facts = new EventFacts(envelope, { changes, now, lookups });
    const { evaluations } = await evaluateEvent(this.registry.index, envelope, facts, { selfCaused: position.selfCaused });
    const explanation = evaluations.map(({ rule, ...evaluation }): RuleExplanation => ({ ...evaluation, rule: rule.id }));
    const matched = evaluations
      .filter((evaluation) => evaluation.outcome === 'matched')
      .map((evaluation): Match => ({ rule: evaluation.rule, evaluation, throttleKey: this.keyFor(evaluation.rule, envelope, now) }));
    if (lookups.failed) return this.retryOrFail(claim, position, explanation, lookups.failed.message);
    return { status: matched.length > 0 ? 'processed' : 'ignored', position, explanation, matched };
  }

  private keyFor(rule: LoadedRule, envelope: EventEnvelope, now: Date): string | null {
    try {
      return throttleKey(rule, envelope, now);
    } catch (error) {
      // An unrenderable key throttles nothing; the rule still runs and the log says why.
      this.logger.warn({ msg: 'throttle key could not be rendered', rule: rule.id, error: (error as Error).message });
      return null;
    }
  }

  /** A lookup failed: the conditions could not be decided, so the event is evaluated again later. */
  private retryOrFail(claim: ClaimedEvent, position: ChainPosition, explanation: RuleExplanation[], error: string): Verdict {
    const attempt = claim.attempts + 1;
    if (attempt >= this.config.actionMaxAttempts) return { status: 'failed', position, explanation, matched: [], error };
    const retryAt = isoIn(this.clock, backoffDelayMs(attempt, Math.random));
    return { status: 'received', position, explanation, matched: [], error, retryAt };
  }

  private async commit(
    manager: EntityManager,
    claim: ClaimedEvent,
    owner: string,
    verdict: Verdict,
    resource: Record<string, unknown> | undefined,
  ): Promise<number> {
    const now = this.clock.now().toISOString();
    const done = verdict.status !== 'received';
    const update = await manager.update(
      EventEntity,
      { seq: claim.seq, leaseOwner: owner, status: 'received' },
      {
        status: verdict.status,
        depth: verdict.position.depth,
        selfCaused: verdict.position.selfCaused,
        error: verdict.error ?? null,
        processedAt: done ? now : null,
        attempts: claim.attempts + (done ? 0 : 1),
        nextAttemptAt: verdict.retryAt ?? now,
        leaseOwner: null,
        leaseUntil: null,
      },
    );
    if (!update.affected) return 0;
    if (!done) {
      this.logger.warn({ msg: 'event evaluation postponed', event: claim.event_id, error: verdict.error, retryAt: verdict.retryAt });
      await manager.update(EventEntity, { seq: claim.seq }, { explanation: JSON.stringify(verdict.explanation) });
      return 0;
    }
    const runs = await this.recordExecutions(manager, claim, verdict, now);
    await manager.update(EventEntity, { seq: claim.seq }, { explanation: JSON.stringify(verdict.explanation) });
    if (claim.resource_key && resource) await this.saveSnapshot(manager, claim, resource, now);
    this.metrics.eventProcessed(claim.type, verdict.status);
    return runs;
  }

  private async recordExecutions(manager: EntityManager, claim: ClaimedEvent, verdict: Verdict, now: string): Promise<number> {
    let runs = 0;
    for (const match of verdict.matched) {
      const execution = this.newExecution(claim, match, now);
      const throttle = match.rule.definition.options?.throttle;
      const throttled =
        throttle !== undefined && match.throttleKey !== null &&
        (await overThrottle(manager, this.db.kind, match.rule.id, match.throttleKey, throttle, new Date(now)));
      if (throttled) Object.assign(execution, { status: 'throttled', finishedAt: now });
      await manager.insert(ExecutionEntity, execution);
      const entry = verdict.explanation.find((e) => e.rule === match.rule.id);
      if (entry) Object.assign(entry, { execution: execution.id }, throttled ? { outcome: 'throttled' } : {});
      this.metrics.ruleMatched(match.rule.id, throttled ? 'throttled' : 'matched');
      if (throttled) continue;
      await manager.insert(ActionRunEntity, newActionRun(execution, JSON.parse(execution.ruleSnapshot) as RuleSnapshot, 0, claim.resource_key, now));
      runs++;
    }
    return runs;
  }

  private newExecution(claim: ClaimedEvent, { rule, evaluation, throttleKey }: Match, now: string): ExecutionEntity {
    const snapshot: RuleSnapshot = {
      id: rule.id,
      name: rule.definition.name,
      version: rule.version,
      timezone: rule.definition.schedule?.timezone,
      actions: rule.definition.actions,
    };
    return Object.assign(new ExecutionEntity(), {
      id: randomUUID(),
      eventSeq: claim.seq,
      eventId: claim.event_id,
      ruleId: rule.id,
      ruleVersion: rule.version,
      status: 'running',
      conditions: JSON.stringify(evaluation.conditions),
      ruleSnapshot: JSON.stringify(snapshot),
      error: null,
      throttleKey,
      createdAt: now,
      finishedAt: null,
    });
  }

  private async saveSnapshot(manager: EntityManager, claim: ClaimedEvent, resource: Record<string, unknown>, now: string) {
    await manager.upsert(
      ResourceSnapshotEntity,
      { resourceKey: claim.resource_key!, payload: JSON.stringify(resource), eventSeq: claim.seq, updatedAt: now },
      ['resourceKey'],
    );
  }
}

function resourceOf(envelope: EventEnvelope, resourceKey: string | null): Record<string, unknown> | undefined {
  if (!resourceKey) return undefined;
  const kind = resourceKey.slice(0, resourceKey.indexOf(':'));
  return envelope.data?.[kind] as Record<string, unknown> | undefined;
}
