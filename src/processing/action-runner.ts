/**
 * Performs one claimed action run and records what happened: the request is
 * rendered from the rule snapshot kept on the execution, sent with the run's id
 * as Idempotency-Key, and the outcome (success, retry later, failed for good) is
 * committed together with the next step of the execution, guarded by the lease,
 * so a run whose lease was taken over by another worker changes nothing.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository, type EntityManager } from 'typeorm';
import { Database } from '../database/database.service.js';
import { createHash } from 'node:crypto';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { EventEntity } from '../database/event.entity.js';
import { parseStoredJson, safeJsonParse } from '../json.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedActionRun } from './work-queue.js';
import { nowFact } from '../rules/facts.js';
import { ActionRunEntity, type ActionRunStatus } from '../database/action-run.entity.js';
import { touchedResource } from '../actions/action-types.js';
import { Metrics } from '../observability/metrics.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import type { ActionType } from '../rules/rule.types.js';
import { decideAfterFailure } from '../actions/retry-policy.js';
import { ServiceClient } from '../actions/service-client.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { renderActionRequest, simulatedResponse, type RenderedRequest } from '../actions/request-renderer.js';

interface LoadedExecution {
  execution: ExecutionEntity;
  rule: RuleSnapshot;
}

interface RunResult {
  status: Exclude<ActionRunStatus, 'pending' | 'running'>;
  request?: ServiceRequest;
  responseStatus?: number;
  response?: unknown;
  errorCode?: string;
  errorMessage?: string;
  nextAttemptAt?: string;
  /** How long the request to the service took. */
  seconds?: number;
}

@Injectable()
export class ActionRunner {
  private readonly logger = new Logger('actions');

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: ServiceClient,
    private readonly db: Database,
    @InjectRepository(ActionRunEntity) private readonly runs: Repository<ActionRunEntity>,
    @InjectRepository(ExecutionEntity) private readonly executions: Repository<ExecutionEntity>,
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    private readonly metrics: Metrics,
  ) {}

  /** The lease a run needs: one request and its answer, with room to record it. */
  get leaseMs(): number {
    return this.config.serviceTimeoutMs + 5_000;
  }

  async perform(claim: ClaimedActionRun, leaseOwner: string): Promise<ActionRunStatus> {
    const loaded = await this.load(claim);
    const result = await this.attempt(claim, loaded);
    const committed = await this.db.write((manager) => this.record(manager, claim, leaseOwner, result, loaded));
    return committed ? result.status : 'running';
  }

  /** Something threw while performing the run: record it like a failed attempt. */
  async recordCrash(claim: ClaimedActionRun, leaseOwner: string, error: Error): Promise<void> {
    const failure = { kind: 'network' as const, code: 'engine_error', message: error.message };
    const decision = decideAfterFailure(failure, claim.attempts, this.config.actionMaxAttempts, this.clock.now(), Math.random);
    const result: RunResult = decision.retry
      ? { status: 'retrying', errorCode: 'engine_error', errorMessage: error.message, nextAttemptAt: new Date(this.clock.now().getTime() + decision.delayMs).toISOString() }
      : { status: 'failed', errorCode: 'engine_error', errorMessage: error.message };
    await this.db.write((manager) => this.record(manager, claim, leaseOwner, result));
  }

  /** Puts a failed run back in the queue (admin retry); the execution resumes from it. */
  async retryFailed(id: string): Promise<ActionRunEntity> {
    return this.db.write(async (manager) => {
      const run = await manager.findOneBy(ActionRunEntity, { id });
      if (!run) throw new DomainError('not_found', `no action run ${id}`);
      if (run.status !== 'failed') {
        throw new DomainError('not_retryable', `action run ${id} is ${run.status}; only failed runs can be retried`);
      }
      const now = this.clock.now().toISOString();
      Object.assign(run, { status: 'pending', attempts: 0, nextAttemptAt: now, updatedAt: now, leaseOwner: null, leaseUntil: null });
      await manager.save(run);
      await manager.update(ExecutionEntity, { id: run.executionId }, { status: 'running', finishedAt: null, error: null });
      return run;
    });
  }

  /** The run's execution and the rule as it was when it matched (it never changes afterwards). */
  private async load(claim: ClaimedActionRun, manager?: EntityManager): Promise<LoadedExecution> {
    const execution = await (manager ?? this.executions.manager).findOneByOrFail(ExecutionEntity, { id: claim.execution_id });
    return { execution, rule: JSON.parse(execution.ruleSnapshot) as RuleSnapshot };
  }

  private async attempt(claim: ClaimedActionRun, { rule }: LoadedExecution): Promise<RunResult> {
    const rendered = await this.requestFor(claim, rule);
    if (!rendered.ok) return { status: 'failed', errorCode: rendered.errorCode, errorMessage: rendered.errorMessage };
    const request = rendered.request;
    if (this.config.dryRun) {
      return { status: 'skipped', request, response: simulatedResponse(request, claim.id.slice(0, 8)) };
    }
    if (request.targetId !== undefined) {
      // The resource is known before the request goes out: record it first, so the
      // service's webhook about the change finds it however soon it arrives.
      const resourceKey = touchedResource(claim.type as ActionType, request, null);
      const now = this.clock.now().toISOString();
      await this.db.write((manager) => this.recordProvenance(manager, claim, resourceKey, now));
    }
    const started = performance.now();
    const outcome = await this.client.send(request, claim.id);
    const seconds = (performance.now() - started) / 1000;
    if (outcome.ok) return { status: 'succeeded', request, responseStatus: outcome.status, response: outcome.body, seconds };
    const decision = decideAfterFailure(outcome, claim.attempts, this.config.actionMaxAttempts, this.clock.now(), Math.random);
    const base = {
      request,
      seconds,
      responseStatus: outcome.kind === 'http' ? outcome.status : undefined,
      errorCode: outcome.code,
      errorMessage: outcome.message,
    };
    if (decision.retry) {
      return { ...base, status: 'retrying', nextAttemptAt: new Date(this.clock.now().getTime() + decision.delayMs).toISOString() };
    }
    return { ...base, status: 'failed' };
  }

  /**
   * The request is rendered once, at the first attempt, and sent unchanged on
   * every retry: the Idempotency-Key promises the service the same request, and
   * a template reading `now` would otherwise change it.
   */
  private async requestFor(claim: ClaimedActionRun, rule: RuleSnapshot): Promise<RenderedRequest> {
    const stored = await this.runs.findOne({ where: { id: claim.id }, select: { id: true, request: true } });
    if (stored?.request) return { ok: true, request: JSON.parse(stored.request) as ServiceRequest };
    const context = await this.contextFor(claim, rule);
    return renderActionRequest(rule.actions[claim.position], context, `${rule.id}@${rule.version}#${claim.position}`);
  }

  private async contextFor(claim: ClaimedActionRun, rule: RuleSnapshot) {
    const event = await this.events.findOneOrFail({ where: { seq: claim.event_seq }, select: { seq: true, payload: true } });
    const earlier = await this.runs.find({
      where: { executionId: claim.execution_id, status: In(['succeeded', 'skipped']) },
      select: { position: true, actionId: true, response: true },
    });
    const actions: Record<string, { response: unknown }> = {};
    for (const run of earlier) {
      if (run.actionId && run.position < claim.position) actions[run.actionId] = { response: parseStoredJson(run.response) };
    }
    return {
      event: safeJsonParse(event.payload),
      rule: { id: rule.id, name: rule.name },
      now: nowFact(this.clock.now(), rule.timezone ?? 'UTC'),
      actions,
    };
  }

  /** Commits the outcome; false when the lease was lost and someone else owns the run now. */
  private async record(
    manager: EntityManager,
    claim: ClaimedActionRun,
    owner: string,
    result: RunResult,
    loaded?: LoadedExecution,
  ): Promise<boolean> {
    const now = this.clock.now().toISOString();
    const update = await manager.update(
      ActionRunEntity,
      { id: claim.id, leaseOwner: owner, status: 'running' },
      {
        status: result.status,
        leaseOwner: null,
        leaseUntil: null,
        nextAttemptAt: result.nextAttemptAt ?? now,
        updatedAt: now,
        request: result.request ? JSON.stringify(result.request) : null,
        responseStatus: result.responseStatus ?? null,
        response: result.response === undefined ? null : JSON.stringify(result.response),
        errorCode: result.errorCode ?? null,
        errorMessage: result.errorMessage ?? null,
      },
    );
    if (!update.affected) return false;
    this.metrics.actionRun(claim.type, result.status, result.seconds);
    if (result.status === 'succeeded' && result.request) {
      await this.recordProvenance(manager, claim, touchedResource(claim.type as ActionType, result.request, result.response), now);
    }
    if (result.status === 'failed') {
      this.logger.warn({ msg: 'action failed', run: claim.id, rule: claim.rule_id, type: claim.type, code: result.errorCode, error: result.errorMessage });
    }
    if (result.status !== 'retrying') await this.advance(manager, claim, result, now, loaded ?? (await this.load(claim, manager)));
    return true;
  }

  /** The resource this action created or changed: an event about it soon after is the engine's own doing. */
  private async recordProvenance(manager: EntityManager, claim: ClaimedActionRun, resourceKey: string | null, now: string): Promise<void> {
    if (!resourceKey) return;
    const event = await manager.findOne(EventEntity, { where: { seq: claim.event_seq }, select: { seq: true, depth: true } });
    await manager.upsert(
      ResourceProvenanceEntity,
      { resourceKey, depth: event?.depth ?? 0, actionRunId: claim.id, ruleId: claim.rule_id, changedAt: now },
      ['resourceKey'],
    );
  }

  /** After a run ends: start the next action of the execution, or close the execution. */
  private async advance(
    manager: EntityManager,
    claim: ClaimedActionRun,
    result: RunResult,
    now: string,
    { execution, rule }: LoadedExecution,
  ): Promise<void> {
    const failed = result.status === 'failed';
    const goOn = !failed || rule.actions[claim.position].continueOnError === true;
    const next = claim.position + 1;
    if (goOn && next < rule.actions.length) {
      await manager.insert(ActionRunEntity, newActionRun(execution, rule, next, claim.resource_key ?? null, now));
      return;
    }
    const failures = await manager.countBy(ActionRunEntity, { executionId: execution.id, status: 'failed' });
    const error = failed
      ? `action ${claim.action_id ?? `#${claim.position + 1}`} (${claim.type}) failed: ${result.errorCode}: ${result.errorMessage}`
      : failures > 0 ? `${failures} action(s) failed` : null;
    await manager.update(ExecutionEntity, { id: execution.id }, {
      status: failures > 0 ? 'failed' : 'succeeded',
      finishedAt: now,
      error,
    });
  }
}

/**
 * An action run's id, which is also its Idempotency-Key, follows from what it is:
 * the event, the rule and the action's position. If an evaluation is ever done
 * again (its commit lost to a power cut after the request went out), the action
 * gets the same key and the service applies it once.
 */
export function actionRunId(eventId: string, ruleId: string, position: number): string {
  const hex = createHash('sha256').update(`${eventId}\u0000${ruleId}\u0000${position}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export function newActionRun(
  execution: Pick<ExecutionEntity, 'id' | 'eventSeq' | 'eventId' | 'ruleId'>,
  rule: RuleSnapshot,
  position: number,
  resourceKey: string | null,
  now: string,
): Partial<ActionRunEntity> {
  const action = rule.actions[position];
  return {
    id: actionRunId(execution.eventId, execution.ruleId, position),
    executionId: execution.id,
    eventSeq: execution.eventSeq,
    resourceKey,
    ruleId: execution.ruleId,
    position,
    actionId: action.id ?? null,
    type: action.type,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: now,
    createdAt: now,
    updatedAt: now,
  };
}

