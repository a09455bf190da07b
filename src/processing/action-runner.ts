/**
 * Performs one claimed action run: the request (rendered once, see
 * run-request.ts) is sent with the run's id as Idempotency-Key, and what
 * happened is committed with the execution's next step (execution-progress.ts),
 * guarded by the lease.
 */
import { Inject, Injectable } from '@nestjs/common';
import { touchedResource } from '../actions/action-types.js';
import { afterFailure, sendAttempt, type AttemptOutcome, type AttemptPolicy } from '../actions/attempt-outcome.js';
import { simulatedResponse } from '../actions/request-renderer.js';
import { ServiceClient } from '../actions/service-client.js';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import type { ActionRunStatus } from '../database/action-run.entity.js';
import { Database } from '../database/database.service.js';
import { statementsOf } from '../database/statements.js';
import { ExecutionProgress, loadExecution, saveProvenance } from './execution-progress.js';
import { RunRequests } from './run-request.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

@Injectable()
export class ActionRunner {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: ServiceClient,
    private readonly db: Database,
    private readonly requests: RunRequests,
    private readonly progress: ExecutionProgress,
  ) {}

  /** The lease a run needs: one request and its answer, with room to record it. */
  get leaseMs(): number {
    return this.config.serviceTimeoutMs + 5_000;
  }

  /** `execution` is known already when the run was handed over by the commit that created it. */
  async perform(claim: ClaimedActionRun, leaseOwner: string, execution?: LoadedExecution): Promise<ActionRunStatus> {
    const loaded = execution ?? (await loadExecution(statementsOf(this.db.manager), claim));
    const result = await this.attempt(claim, loaded);
    const committed = await this.progress.record(claim, leaseOwner, result, this.nowIso(), loaded);
    return committed ? result.status : 'running';
  }

  /** Something threw while performing the run: record it like a failed attempt. */
  async recordCrash(claim: ClaimedActionRun, leaseOwner: string, error: Error): Promise<void> {
    const failure = { kind: 'network' as const, code: 'engine_error', message: error.message };
    const result: AttemptOutcome = { errorCode: 'engine_error', errorMessage: error.message, ...afterFailure(failure, this.policy(claim)) };
    await this.progress.record(claim, leaseOwner, result, this.nowIso());
  }

  private async attempt(claim: ClaimedActionRun, { rule }: LoadedExecution): Promise<AttemptOutcome> {
    const rendered = await this.requests.requestFor(claim, rule);
    if (!rendered.ok) return { status: 'failed', errorCode: rendered.errorCode, errorMessage: rendered.errorMessage };
    const request = rendered.request;
    if (this.config.dryRun) {
      return { status: 'skipped', request, response: simulatedResponse(request, claim.id.slice(0, 8)) };
    }
    if (request.targetId !== undefined && !(claim.request && claim.attempts === 1)) {
      // The resource is known before the request goes out: record it first, so the
      // service's webhook about the change finds it however soon it arrives. (A
      // request rendered when the run was created had it recorded then; a retry
      // refreshes it, as the self-caused window counts from the change.)
      const resourceKey = touchedResource(claim.type, request, null);
      await this.db.write((manager) => saveProvenance(statementsOf(manager), claim, resourceKey, this.nowIso()));
    }
    return sendAttempt(this.client, request, claim.id, this.policy(claim));
  }

  private policy(claim: ClaimedActionRun): AttemptPolicy {
    return { attempt: claim.attempts, maxAttempts: this.config.actionMaxAttempts, clock: this.clock, random: Math.random };
  }

  private nowIso(): string {
    return this.clock.now().toISOString();
  }
}
