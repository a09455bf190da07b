/**
 * Performs one claimed action run: the request (rendered once, see
 * run-request.ts) is sent with the run's id as Idempotency-Key, and what
 * happened is committed with the execution's next step (execution-progress.ts),
 * guarded by the lease. The run takes a slot of the rate budget first, without
 * waiting: with none free it goes back to the database, due when one frees
 * (budget-wait.ts).
 *
 * On PostgreSQL the service client's budget is the one every replica shares
 * (shared-rate-budget.ts), set here, where the database and this process's
 * lease owner are known.
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { touchedResource } from '../actions/action-types.js';
import { afterFailure, sendAttempt, type AttemptOutcome, type AttemptPolicy } from '../actions/attempt-outcome.js';
import { simulatedResponse } from '../actions/request-renderer.js';
import type { BudgetRoom } from '../actions/rate-budget.js';
import { ServiceClient } from '../actions/service-client.js';
import { SharedRateBudget } from '../actions/shared-rate-budget.js';
import { CLOCK, nowIso, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import type { ActionRunStatus } from '../database/action-run.entity.js';
import { Database } from '../database/database.service.js';
import { statementsOf } from '../database/statements.js';
import { handBackForBudget } from './budget-wait.js';
import { ExecutionProgress, loadExecution, loadExecutions, saveProvenance } from './execution-progress.js';
import { RunRequests } from './run-request.js';
import { StepRunner } from './step-runner.js';
import { WorkQueue } from './work-queue.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

/** No slot of the budget was free: nothing was sent; one may be in `waitMs`. */
interface NoSlot {
  waitMs: number;
}

@Injectable()
export class ActionRunner {
  /** Runs being performed that have not taken their slot of the budget yet. */
  private starting: number;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: ServiceClient,
    private readonly db: Database,
    private readonly requests: RunRequests,
    private readonly progress: ExecutionProgress,
    private readonly steps: StepRunner,
    @Optional() queue?: WorkQueue,
  ) {
    this.starting = 0;
    if (db.kind === 'postgres') {
      const budget = { limitPerMinute: config.rateLimitPerMinute, clock: () => clock.now().getTime() };
      client.useBudget(new SharedRateBudget({ db, replica: queue?.owner ?? randomUUID(), ...budget }));
    }
  }

  /** The lease a run needs: one request and its answer, with room to record it. */
  get leaseMs(): number {
    return this.config.serviceTimeoutMs + 5_000;
  }

  /**
   * How many more runs the budget could start now, up to `wanted` (all of them
   * in dry-run, which sends nothing): what to claim. Runs claimed that have not
   * taken their slot yet will take one first.
   */
  room(wanted: number): BudgetRoom {
    if (this.config.dryRun) return { free: Math.max(0, wanted), waitMs: 0 };
    const room = this.client.budget.room(wanted + this.starting);
    return { free: Math.max(0, room.free - this.starting), waitMs: room.waitMs };
  }

  /**
   * The executions of runs claimed together, read with one statement (on PostgreSQL each read is a round trip,
   * and a claim of 32 runs read them one by one); a run whose execution is not among them reads its own.
   */
  async executionsOf(claims: ClaimedActionRun[]): Promise<Map<string, LoadedExecution>> {
    if (claims.length < 2) return new Map();
    return loadExecutions(statementsOf(this.db.manager), this.db.kind, [...new Set(claims.map((claim) => claim.execution_id))]);
  }

  /**
   * `execution` is known already when the run was handed over by the commit
   * that created it. 'pending' (or 'retrying') when it was handed back for want
   * of a slot of the budget; 'running' when the lease was lost meanwhile.
   */
  async perform(claim: ClaimedActionRun, leaseOwner: string, execution?: LoadedExecution): Promise<ActionRunStatus> {
    // Counted from the claim until its slot is taken (or it ends before), so that room() does not count its slot twice.
    // Bound, not an arrow: the bundle names an arrow made per run at a cost (condition-results.ts `within`).
    const taken = this.slotTaken.bind(this, { counted: true });
    this.starting += 1;
    let loaded: LoadedExecution;
    let result: AttemptOutcome | NoSlot;
    try {
      loaded = execution ?? (await loadExecution(statementsOf(this.db.manager), claim));
      // A delay, a check or a forEach's expansion sends nothing of its own and takes no slot (step-runner.ts).
      if (this.steps.handles(claim, loaded)) return await this.steps.perform(claim, leaseOwner, loaded);
      result = await this.attempt(claim, loaded, taken);
    } finally {
      taken();
    }
    if ('waitMs' in result) {
      const handedBack = await handBackForBudget(this.db, this.clock, claim, leaseOwner, result.waitMs);
      return !handedBack ? 'running' : claim.attempts > 1 ? 'retrying' : 'pending';
    }
    // The request went out: its outcome outlasts a short outage of the database rather than be sent again when the lease runs out.
    const committed = await this.db.patiently(() => this.progress.record(claim, leaseOwner, result, this.nowIso(), loaded), this.leaseMs - this.config.serviceTimeoutMs);
    return committed ? result.status : 'running';
  }

  /** Something threw while performing the run: record it like a failed attempt. */
  async recordCrash(claim: ClaimedActionRun, leaseOwner: string, error: Error): Promise<void> {
    const failure = { kind: 'network' as const, code: 'engine_error', message: error.message };
    const result: AttemptOutcome = { errorCode: 'engine_error', errorMessage: error.message, ...afterFailure(failure, this.policy(claim)) };
    await this.progress.record(claim, leaseOwner, result, this.nowIso());
  }

  private async attempt(claim: ClaimedActionRun, execution: LoadedExecution, taken: () => void): Promise<AttemptOutcome | NoSlot> {
    const rendered = await this.requests.requestFor(claim, execution);
    if (!rendered.ok) return { status: 'failed', errorCode: rendered.errorCode, errorMessage: rendered.errorMessage };
    const request = rendered.request;
    if (this.config.dryRun) {
      return { status: 'skipped', request, requestJson: rendered.json, response: simulatedResponse(request, claim.id.slice(0, 8)) };
    }
    // Before the resource is recorded as changed: a run handed back changes nothing.
    const waitMs = await this.client.takeSlot();
    taken();
    if (waitMs > 0) return { waitMs };
    if (request.targetId !== undefined && !(claim.request && claim.attempts === 1)) {
      // The resource is known before the request goes out: record it first, so the
      // service's webhook about the change finds it however soon it arrives. (A
      // request rendered when the run was created had it recorded then; a retry
      // refreshes it, as the self-caused window counts from the change.)
      const resourceKey = touchedResource(claim.type, request, null);
      await this.db.write((manager) => saveProvenance(statementsOf(manager), claim, resourceKey, this.nowIso()));
    }
    const result = await sendAttempt(this.client, request, claim.id, this.policy(claim));
    if (rendered.json !== undefined) result.requestJson = rendered.json;
    return result;
  }

  private policy(claim: ClaimedActionRun): AttemptPolicy {
    return { attempt: claim.attempts, maxAttempts: this.config.actionMaxAttempts, clock: this.clock, random: Math.random };
  }

  /** A run's slot is taken (or the run ends before): it no longer counts among those starting, once. */
  private slotTaken(run: { counted: boolean }): void {
    if (run.counted) this.starting -= 1;
    run.counted = false;
  }

  private nowIso(): string {
    return nowIso(this.clock);
  }
}
