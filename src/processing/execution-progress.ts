/**
 * Records how an execution moves on after an attempt, in the transaction the
 * runner opens: the run's outcome (only while this worker still holds its
 * lease: a run taken over by another worker changes nothing), the resource the
 * action touched (loop protection), and the execution's next step: the next
 * action's run, or the execution's end.
 */
import { Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { touchedResource } from '../actions/action-types.js';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { EventEntity } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { Metrics } from '../observability/metrics.js';
import { newActionRun } from './new-action-run.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedActionRun } from './work-queue.js';

/** A run's execution and the rule as it was when it matched (it never changes afterwards). */
export interface LoadedExecution {
  execution: ExecutionEntity;
  rule: RuleSnapshot;
}

export async function loadExecution(manager: EntityManager, claim: ClaimedActionRun): Promise<LoadedExecution> {
  const execution = await manager.findOneByOrFail(ExecutionEntity, { id: claim.execution_id });
  return { execution, rule: JSON.parse(execution.ruleSnapshot) as RuleSnapshot };
}

@Injectable()
export class ExecutionProgress {
  private readonly logger = new Logger('actions');

  constructor(private readonly metrics: Metrics) {}

  /** Commits the outcome; false when the lease was lost and someone else owns the run now. */
  async record(manager: EntityManager, claim: ClaimedActionRun, owner: string, result: AttemptOutcome, now: string, loaded?: LoadedExecution): Promise<boolean> {
    const update = await manager.update(ActionRunEntity, { id: claim.id, leaseOwner: owner, status: 'running' }, outcomeColumns(result, now));
    if (!update.affected) return false;
    this.metrics.actionRun(claim.type, result.status, result.seconds);
    if (result.status === 'succeeded' && result.request) {
      await this.recordProvenance(manager, claim, touchedResource(claim.type, result.request, result.response), now);
    }
    if (result.status === 'failed') {
      this.logger.warn({ msg: 'action failed', run: claim.id, rule: claim.rule_id, type: claim.type, code: result.errorCode, error: result.errorMessage });
    }
    if (result.status !== 'retrying') await this.advance(manager, claim, result, now, loaded ?? (await loadExecution(manager, claim)));
    return true;
  }

  /** The resource this action created or changed: an event about it soon after is the engine's own doing. */
  async recordProvenance(manager: EntityManager, claim: ClaimedActionRun, resourceKey: string | null, now: string): Promise<void> {
    if (!resourceKey) return;
    const event = await manager.findOne(EventEntity, { where: { seq: claim.event_seq }, select: { seq: true, depth: true } });
    await manager.upsert(
      ResourceProvenanceEntity,
      { resourceKey, depth: event?.depth ?? 0, actionRunId: claim.id, ruleId: claim.rule_id, changedAt: now },
      ['resourceKey'],
    );
  }

  /** After a run ends: start the next action of the execution, or close the execution. */
  private async advance(manager: EntityManager, claim: ClaimedActionRun, result: AttemptOutcome, now: string, { execution, rule }: LoadedExecution): Promise<void> {
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
    await manager.update(ExecutionEntity, { id: execution.id }, { status: failures > 0 ? 'failed' : 'succeeded', finishedAt: now, error });
  }
}

function outcomeColumns(result: AttemptOutcome, now: string): Partial<ActionRunEntity> {
  return {
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
  };
}
