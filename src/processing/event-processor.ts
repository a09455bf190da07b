/**
 * Evaluates one claimed event against the rules that listen to it and commits,
 * in one transaction guarded by the lease: the event's outcome and explanation,
 * an execution per matched rule with its first action run, and the resource
 * snapshot the next event's `changes` will be computed from.
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database.service.js';
import { newActionRun } from '../actions/action-runner.js';
import { ActionRunEntity } from '../actions/action-run.entity.js';
import { backoffDelayMs } from '../actions/retry-policy.js';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { EventEntity, type EventStatus } from '../intake/event.entity.js';
import { safeJsonParse, type EventEnvelope } from '../intake/envelope.js';
import { computeChanges, EventFacts, type Changes } from '../rules/facts.js';
import { evaluateRule, type RuleEvaluation } from '../rules/rule-evaluator.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { ExecutionEntity } from './execution.entity.js';
import { ResourceSnapshotEntity } from './resource-snapshot.entity.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedEvent } from './work-queue.js';

/** One listening rule's outcome for an event, as `GET /admin/events/:id` shows it. */
export interface RuleExplanation extends RuleEvaluation {
  rule: string;
  outcome: 'matched' | 'not_matched' | 'error';
  execution?: string;
}

interface Verdict {
  status: EventStatus;
  explanation: RuleExplanation[];
  matched: Array<{ rule: LoadedRule; evaluation: RuleEvaluation }>;
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
  ) {}

  /** Returns the number of action runs created (0 when the lease was lost). */
  async process(claim: ClaimedEvent, leaseOwner: string): Promise<number> {
    const envelope = safeJsonParse(claim.payload) as EventEnvelope;
    const resource = resourceOf(envelope, claim.resource_key);
    const previous = claim.resource_key
      ? await this.db.manager.findOneBy(ResourceSnapshotEntity, { resourceKey: claim.resource_key })
      : null;
    const before = previous ? (safeJsonParse(previous.payload) as Record<string, unknown>) : undefined;
    const changes = computeChanges(resource, before, envelope.data?.changes);
    const verdict = await this.evaluate(claim, envelope, changes);
    return this.db.write((manager) => this.commit(manager, claim, leaseOwner, verdict, resource));
  }

  /**
   * Something threw while handling the event (a bug, the database): record it,
   * and try again later, so one poisonous event neither spins nor blocks its
   * resource forever.
   */
  async recordCrash(claim: ClaimedEvent, leaseOwner: string, error: Error): Promise<void> {
    const verdict = this.retryOrFail(claim, [], `processing failed: ${error.message}`);
    await this.db.write((manager) => this.commit(manager, claim, leaseOwner, verdict, undefined));
  }

  private async evaluate(claim: ClaimedEvent, envelope: EventEnvelope, changes: Changes): Promise<Verdict> {
    const lookups = new ServiceLookups(this.client);
    const now = this.clock.now();
    const facts = new EventFacts(envelope, { changes, now, lookups });
    const { evaluate } = this.registry.index.candidates(envelope);
    const explanation: RuleExplanation[] = [];
    const matched: Verdict['matched'] = [];
    for (const rule of evaluate) {
      const evaluation = await evaluateRule(rule, facts);
      const outcome = evaluation.error ? 'error' : evaluation.matched ? 'matched' : 'not_matched';
      explanation.push({ rule: rule.id, outcome, ...evaluation });
      if (evaluation.matched && !evaluation.error) matched.push({ rule, evaluation });
    }
    if (lookups.failed) return this.retryOrFail(claim, explanation, lookups.failed.message);
    return { status: matched.length > 0 ? 'processed' : 'ignored', explanation, matched };
  }

  /** A lookup failed: the conditions could not be decided, so the event is evaluated again later. */
  private retryOrFail(claim: ClaimedEvent, explanation: RuleExplanation[], error: string): Verdict {
    const attempt = claim.attempts + 1;
    if (attempt >= this.config.actionMaxAttempts) return { status: 'failed', explanation, matched: [], error };
    const retryAt = new Date(this.clock.now().getTime() + backoffDelayMs(attempt, Math.random)).toISOString();
    return { status: 'received', explanation, matched: [], error, retryAt };
  }

  private async commit(
    manager: EntityManager,
    claim: ClaimedEvent,
    owner: string,
    verdict: Verdict,
    resource: Record<string, unknown> | undefined,
  ): Promise<number> {
    const now = this.clock.now().toISOString();
    const executions = verdict.matched.map(({ rule, evaluation }) => this.newExecution(claim, rule, evaluation, now));
    for (const entry of verdict.explanation) {
      entry.execution = executions.find((e) => e.ruleId === entry.rule)?.id;
    }
    const done = verdict.status !== 'received';
    const update = await manager.update(
      EventEntity,
      { seq: claim.seq, leaseOwner: owner, status: 'received' },
      {
        status: verdict.status,
        explanation: JSON.stringify(verdict.explanation),
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
      return 0;
    }
    if (executions.length > 0) {
      await manager.insert(ExecutionEntity, executions);
      const runs = executions.map((e) => newActionRun(e, JSON.parse(e.ruleSnapshot) as RuleSnapshot, 0, claim.resource_key, now));
      await manager.insert(ActionRunEntity, runs);
    }
    if (claim.resource_key && resource) await this.saveSnapshot(manager, claim, resource, now);
    return executions.length;
  }

  private newExecution(claim: ClaimedEvent, rule: LoadedRule, evaluation: RuleEvaluation, now: string): ExecutionEntity {
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
