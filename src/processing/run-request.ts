/**
 * The request an action run sends. It is rendered once, at the first attempt,
 * and sent unchanged on every retry: the Idempotency-Key promises the service
 * the same request, and a template reading `now` would otherwise change it.
 */
import { Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { renderActionRequest, type RenderedRequest } from '../actions/request-renderer.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { CLOCK, type Clock } from '../clock.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { EventEntity } from '../database/event.entity.js';
import { parseStoredJson, safeJsonParse } from '../json.js';
import { templateContext, type EarlierActions } from '../rules/template-context.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedActionRun } from './work-queue.js';

@Injectable()
export class RunRequests {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectRepository(ActionRunEntity) private readonly runs: Repository<ActionRunEntity>,
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
  ) {}

  async requestFor(claim: ClaimedActionRun, rule: RuleSnapshot): Promise<RenderedRequest> {
    const stored = await this.runs.findOne({ where: { id: claim.id }, select: { id: true, request: true } });
    if (stored?.request) return { ok: true, request: JSON.parse(stored.request) as ServiceRequest };
    const event = await this.events.findOneOrFail({ where: { seq: claim.event_seq }, select: { seq: true, payload: true } });
    const context = templateContext(rule, safeJsonParse(event.payload), this.clock.now(), await this.earlierActions(claim));
    return renderActionRequest(rule.actions[claim.position], context, `${rule.id}@${rule.version}#${claim.position}`);
  }

  /** `actions.<id>.response` of the execution's earlier actions that succeeded (or were skipped in dry-run). */
  private async earlierActions(claim: ClaimedActionRun): Promise<EarlierActions> {
    const earlier = await this.runs.find({
      where: { executionId: claim.execution_id, status: In(['succeeded', 'skipped']) },
      select: { position: true, actionId: true, response: true },
    });
    const actions: Record<string, { response: unknown }> = {};
    for (const run of earlier) {
      if (run.actionId && run.position < claim.position) actions[run.actionId] = { response: parseStoredJson(run.response) };
    }
    return actions;
  }
}
