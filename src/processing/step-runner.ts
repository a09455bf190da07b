/**
 * Performs the runs that are steps of an execution rather than requests
 * (SPEC section 11), claimed like any action run when due:
 *
 * - `delay`: reached, its duration is rendered and the run goes back to the
 *   database due at `resume_at` (the execution is `waiting`: no worker, timer
 *   or memory is held meanwhile); claimed again when due, the execution
 *   resumes, unless it was cancelled or debounced meanwhile (waiting.ts: the
 *   execution's row decides, exactly one wins). A resume that finds the engine
 *   was down past the due time runs at once, once.
 * - `check`: its conditions are evaluated with fresh lookups; false stops the
 *   execution (`stopped`), the condition results kept on the run.
 * - a `forEach` action: its items are resolved (more than MAX_FOREACH_ITEMS
 *   fails it with `too_many_items` before anything is sent) and one run per
 *   item is created, each with its own Idempotency-Key and retries.
 *
 * A lookup that fails is retried with backoff like an action's attempt.
 */
import { Inject, Injectable } from '@nestjs/common';
import { backoffDelayMs } from '../actions/retry-policy.js';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import { CLOCK, isoIn, nowIso, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import type { ActionRunStatus } from '../database/action-run.entity.js';
import { Database } from '../database/database.service.js';
import { statementsOf, type Statements } from '../database/statements.js';
import { renderDuration } from '../rules/duration.js';
import { EventFacts } from '../rules/facts.js';
import { resolveForEach } from '../rules/for-each.js';
import { evaluateCheck } from '../rules/rule-evaluator.js';
import type { RuleAction } from '../rules/rule.types.js';
import { advanceExecution, finishExecution } from './execution-steps.js';
import { DEBOUNCE_POSITION } from './first-entry.js';
import { RunRequests } from './run-request.js';
import { StepRecords, type StepEnd } from './step-records.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

@Injectable()
export class StepRunner {
  private readonly records: StepRecords;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly client: ServiceClient,
    private readonly requests: RunRequests,
  ) {
    this.records = new StepRecords(db);
  }

  /** Whether the run is a step (or a forEach's expansion) rather than a request. */
  handles(claim: ClaimedActionRun, execution: LoadedExecution): boolean {
    if (claim.type === 'delay' || claim.type === 'check') return true;
    return execution.rule.actions[claim.position]?.forEach !== undefined && (claim.item_index ?? null) === null;
  }

  async perform(claim: ClaimedActionRun, owner: string, execution: LoadedExecution): Promise<ActionRunStatus> {
    if (claim.type === 'delay') return this.delay(claim, owner, execution);
    const entry = execution.rule.actions[claim.position]!;
    if (claim.type === 'check') return this.check(claim, owner, execution, entry);
    return this.expand(claim, owner, execution, entry);
  }

  private now(): string {
    return nowIso(this.clock);
  }

  private async delay(claim: ClaimedActionRun, owner: string, execution: LoadedExecution): Promise<ActionRunStatus> {
    const stored = claim.request ? (JSON.parse(claim.request) as { resume_at?: string }) : {};
    if (stored.resume_at !== undefined) return this.records.resume(claim, owner, execution, this.now());
    const entry = claim.position === DEBOUNCE_POSITION ? undefined : execution.rule.actions[claim.position];
    const ms = entry === undefined ? { ok: true as const, ms: (execution.rule.debounceSeconds ?? 0) * 1000 } : await this.durationOf(claim, execution, entry);
    if (!ms.ok) return this.end(claim, owner, execution, { status: 'failed', errorCode: ms.code, errorMessage: ms.message });
    return this.records.wait(claim, owner, execution, isoIn(this.clock, ms.ms), this.now());
  }

  private async durationOf(claim: ClaimedActionRun, execution: LoadedExecution, entry: RuleAction) {
    const { context } = await this.requests.contextFor(claim, execution);
    return renderDuration(entry.params?.duration, context);
  }

  private async check(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, entry: RuleAction): Promise<ActionRunStatus> {
    const { facts, lookups } = await this.factsFor(claim, execution);
    const result = await evaluateCheck(entry.conditions!, facts);
    if (lookups.failed) return this.retryOrFail(claim, owner, execution, 'lookup_failed', lookups.failed.message);
    const response = { passed: result.passed, conditions: result.conditions, ...(result.error ? { error: result.error } : {}) };
    if (result.passed) return this.end(claim, owner, execution, { status: 'succeeded', response });
    return this.end(claim, owner, execution, { status: 'succeeded', response, stop: true });
  }

  private async expand(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, entry: RuleAction): Promise<ActionRunStatus> {
    const { facts, lookups, context } = await this.factsFor(claim, execution);
    const items = await resolveForEach(entry.forEach!, context, facts, this.config.maxForEachItems);
    if (!items.ok && (items.code === 'lookup_failed' || lookups.failed)) return this.retryOrFail(claim, owner, execution, items.code, items.message);
    if (!items.ok) return this.end(claim, owner, execution, { status: 'failed', errorCode: items.code, errorMessage: items.message });
    return this.end(claim, owner, execution, { status: 'succeeded', response: { items: items.items.length }, items: items.items });
  }

  private async factsFor(claim: ClaimedActionRun, execution: LoadedExecution) {
    const { context, envelope } = await this.requests.contextFor(claim, execution);
    const lookups = new ServiceLookups(this.client);
    const facts = new EventFacts(envelope, { now: this.clock.now(), lookups, timezone: execution.rule.timezone });
    return { facts, lookups, context };
  }

  private retryOrFail(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, code: string, message: string): Promise<ActionRunStatus> {
    if (claim.attempts >= this.config.actionMaxAttempts) return this.end(claim, owner, execution, { status: 'failed', errorCode: code, errorMessage: message });
    const nextAttemptAt = isoIn(this.clock, backoffDelayMs(claim.attempts, Math.random));
    return this.end(claim, owner, execution, { status: 'retrying', errorCode: code, errorMessage: message, nextAttemptAt });
  }

  /** Records how the step ended and moves the execution on, in one transaction guarded by the lease. */
  private async end(claim: ClaimedActionRun, owner: string, execution: LoadedExecution, end: StepEnd): Promise<ActionRunStatus> {
    const now = this.now();
    const recorded = await this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      if (!(await this.records.record(sql, claim, owner, end, now))) return false;
      await this.moveOn(sql, claim, execution, end, now);
      return true;
    });
    return recorded ? end.status : 'running';
  }

  private async moveOn(sql: Statements, claim: ClaimedActionRun, execution: LoadedExecution, end: StepEnd, now: string): Promise<void> {
    if (end.status === 'retrying') return;
    if (end.stop) return finishExecution(sql, execution.id, 'stopped', now, null);
    if (end.items !== undefined && end.items.length > 0) return this.records.insertItems(sql, claim, execution, end.items, now);
    await advanceExecution(sql, this.db.kind, claim, { failed: end.status === 'failed', errorCode: end.errorCode, errorMessage: end.errorMessage }, now, execution);
  }
}

