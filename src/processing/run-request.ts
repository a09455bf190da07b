/**
 * The request an action run sends. It is rendered once, when the run is
 * created (the first action, event-commit.ts) or at its first attempt (later
 * actions, which read the earlier ones' responses), and sent unchanged on
 * every retry: the Idempotency-Key promises the service the same request, and
 * a template reading `now` would otherwise change it.
 */
import { Inject, Injectable } from '@nestjs/common';
import { renderActionRequest, type RenderedRequest } from '../actions/request-renderer.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import type { CausalScope } from '../causal-scope.js';
import { CLOCK, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { statementsOf } from '../database/statements.js';
import { parseStoredJson, safeJsonParse } from '../json.js';
import { templateContext, type ContextExtras, type EarlierActions } from '../rules/template-context.js';
import type { TemplateContext } from '../rules/template.js';
import type { EventEnvelope } from '../intake/envelope.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';

const STORED_REQUEST = 'SELECT request FROM action_runs WHERE id = ?';
const EVENT_PAYLOAD = 'SELECT payload FROM events WHERE seq = ?';
const RECORD_SCOPE = `UPDATE action_runs SET scope_kind = ?, scope_parent = ? WHERE id = ? AND status = 'running'`;
const EARLIER_ACTIONS = `
  SELECT action_id, response FROM action_runs
  WHERE execution_id = ? AND position < ? AND status IN ('succeeded', 'skipped') ORDER BY position`;

@Injectable()
export class RunRequests {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
  ) {}

  async requestFor(claim: ClaimedActionRun, execution: Pick<LoadedExecution, 'rule' | 'facts'>): Promise<RenderedRequest> {
    const { rule } = execution;
    const sql = statementsOf(this.db.manager);
    if (claim.rendered !== undefined && claim.request) return { ok: true, request: claim.rendered, json: claim.request };
    const stored = claim.request ?? (await sql.rows<{ request: string | null }>(STORED_REQUEST, [claim.id]))[0]?.request;
    if (stored) return { ok: true, request: JSON.parse(stored) as ServiceRequest, json: stored };
    const { context } = await this.contextFor(claim, execution);
    const rendered = renderActionRequest(rule.actions[claim.position], context, `${rule.id}@${rule.version}#${claim.position}`);
    if (rendered.ok && rendered.request.createsIn) await this.recordScope(claim, rendered.request.createsIn);
    return rendered;
  }

  /** What the run's templates see now: its event, `now`, earlier actions' responses, the execution's facts, its item. */
  async contextFor(claim: ClaimedActionRun, execution: Pick<LoadedExecution, 'rule' | 'facts'>): Promise<{ context: TemplateContext; envelope: EventEnvelope }> {
    const [event] = await statementsOf(this.db.manager).rows<{ payload: string }>(EVENT_PAYLOAD, [claim.event_seq]);
    if (!event) throw new Error(`event ${claim.event_seq} of action run ${claim.id} is missing`);
    const envelope = safeJsonParse(event.payload) as EventEnvelope;
    const context = templateContext(execution.rule, envelope, this.clock.now(), await this.earlierActions(claim), extrasOf(claim, execution));
    return { context, envelope };
  }

  /**
   * A creating request rendered at its first attempt: its scope goes on the
   * run before the request is sent, so events it may cause wait for its answer
   * (work-queue.ts, the causal barrier). The first action's is written with
   * the run (event-commit.ts).
   */
  private async recordScope(claim: ClaimedActionRun, scope: CausalScope): Promise<void> {
    await this.db.write((manager) => statementsOf(manager).run(RECORD_SCOPE, [scope.kind, scope.parent, claim.id]));
  }

  /** `actions.<id>.response` of the execution's earlier actions that succeeded (or were skipped in dry-run). */
  private async earlierActions(claim: ClaimedActionRun): Promise<EarlierActions> {
    const earlier = await statementsOf(this.db.manager).rows<{ action_id: string | null; response: string | null }>(EARLIER_ACTIONS, [
      claim.execution_id,
      claim.position,
    ]);
    const actions: Record<string, { response: unknown }> = {};
    for (const run of earlier) if (run.action_id) actions[run.action_id] = { response: parseStoredJson(run.response) };
    return actions;
  }
}

/** `facts` of the execution, and `item`/`index` of a forEach item's run. */
function extrasOf(claim: ClaimedActionRun, { facts }: { facts?: Record<string, unknown> }): ContextExtras {
  const extras: ContextExtras = { facts };
  if (claim.item_index !== null && claim.item_index !== undefined) {
    extras.index = claim.item_index;
    extras.item = claim.item === null || claim.item === undefined ? null : parseStoredJson(claim.item);
  }
  return extras;
}
