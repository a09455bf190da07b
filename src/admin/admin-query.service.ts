/** Read side of the admin API: what happened to events, executions and action runs. */
import { Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, LessThan, Not, Repository, type FindOptionsWhere } from 'typeorm';
import { CLOCK, type Clock } from '../clock.js';
import { ActionRunEntity, type ActionRunStatus } from '../database/action-run.entity.js';
import { DomainError } from '../errors.js';
import { kindOf } from '../database/sql.js';
import { EventEntity } from '../database/event.entity.js';
import { EXECUTION_STATUSES, ExecutionEntity } from '../database/execution.entity.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import type { EventEnvelope } from '../intake/envelope.js';
import { eventWhere, parseEventFilter } from './event-filter.js';
import { whyWaiting } from './event-waiting.js';
import { decodeCursor, toPage, type Page } from './pagination.js';
import { walkedPageIds } from './runs-by-status.js';
import { actionRunView, eventSummary, executionView, parsed } from './views.js';

const RUN_STATUSES: ActionRunStatus[] = ['pending', 'running', 'succeeded', 'retrying', 'failed', 'skipped', 'cancelled'];

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);
const isPair = (v: unknown): v is [string, string] =>
  Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string';

function checkStatus<T extends string>(raw: string | undefined, allowed: T[]): T | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!allowed.includes(raw as T)) {
    throw new DomainError('validation_failed', `status must be one of ${allowed.join(', ')}`, [
      { path: 'status', message: `must be one of ${allowed.join(', ')}` },
    ]);
  }
  return raw as T;
}

@Injectable()
export class AdminQueryService {
  constructor(
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    @InjectRepository(ExecutionEntity) private readonly executions: Repository<ExecutionEntity>,
    @InjectRepository(ActionRunEntity) private readonly runs: Repository<ActionRunEntity>,
    private readonly registry: RuleRegistry,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** Filters: type, status, resource, rule, since, until (event-filter.ts). */
  async listEvents(filter: Record<string, string | undefined>, limit: number): Promise<Page<unknown>> {
    const where = eventWhere(parseEventFilter(filter));
    const after = decodeCursor(filter.cursor, isNumber);
    if (after !== undefined) where.seq = LessThan(after);
    const rows = await this.events.find({ where, order: { seq: 'DESC' }, take: limit + 1 });
    return toPage(rows, limit, eventSummary, (e) => e.seq);
  }

  async getEvent(id: string) {
    const event = await this.events.findOneBy({ eventId: id });
    if (!event) throw new DomainError('not_found', `no event with id ${id}`);
    const executions = await this.executions.find({ where: { eventSeq: event.seq }, order: { createdAt: 'ASC' } });
    const runs = executions.length
      ? await this.runs.find({ where: { executionId: In(executions.map((x) => x.id)) } })
      : [];
    const payload = parsed(event.payload);
    return {
      ...eventSummary(event),
      payload,
      rules: [...((parsed(event.explanation) as Array<{ rule: string }> | null) ?? []), ...this.excludedBefore(event, payload)],
      executions: executions.map((x) => executionView(x, runs)),
      // The waiting executions it cancelled (options.cancelOn).
      cancelled: parsed(event.cancelled) ?? [],
      // While it waits, why (the same reasons as /context): e.g. the creating runs the causal barrier holds it for.
      waiting: await whyWaiting(this.events.manager, event, this.clock.now()),
    };
  }

  /**
   * Rules the index ruled out without evaluating them (a top-level `equal` on an
   * event field that did not hold) are not stored per event, so that 10,000
   * rules cost nothing per event; their explanation is derived here, from the
   * stored payload and the rules loaded now.
   */
  private excludedBefore(event: EventEntity, payload: unknown) {
    if (event.status === 'received' || event.explanation === null || typeof payload !== 'object' || payload === null) return [];
    const { excluded } = this.registry.index.candidates(payload as EventEnvelope, { explainExcluded: true });
    return excluded.map(({ rule, condition, factValue }) => ({
      rule: rule.id,
      ruleVersion: rule.version,
      outcome: 'not_matched',
      matched: false,
      conditions: [{ ...condition, factValue, result: false }],
      note: 'ruled out by the rule index before evaluation (explained from the rule as loaded now)',
    }));
  }

  async listExecutions(filter: { rule?: string; status?: string; cursor?: string }, limit: number): Promise<Page<unknown>> {
    const base: FindOptionsWhere<ExecutionEntity> = {};
    if (filter.rule) base.ruleId = filter.rule;
    const status = checkStatus(filter.status, [...EXECUTION_STATUSES]);
    if (status) base.status = status;
    // The same executions, said so that PostgreSQL's index of waiting ones serves it (migration 1766100000000).
    if (status === 'waiting') base.resumeAt = Not(IsNull());
    const after = decodeCursor(filter.cursor, isPair);
    // Keyset pagination on (created_at, id), newest first.
    const where = after ? [{ ...base, createdAt: LessThan(after[0]) }, { ...base, createdAt: after[0], id: LessThan(after[1]) }] : [base];
    const rows = await this.executions.find({ where, order: { createdAt: 'DESC', id: 'DESC' }, take: limit + 1 });
    return toPage(rows, limit, (x) => executionView(x), (x) => [x.createdAt, x.id]);
  }

  async getExecution(id: string) {
    const execution = await this.executions.findOneBy({ id });
    if (!execution) throw new DomainError('not_found', `no execution with id ${id}`);
    const runs = await this.runs.find({ where: { executionId: id } });
    return executionView(execution, runs);
  }

  async listActionRuns(filter: { status?: string; cursor?: string }, limit: number): Promise<Page<unknown>> {
    const where: FindOptionsWhere<ActionRunEntity>[] = [];
    const status = checkStatus(filter.status, RUN_STATUSES);
    const base: FindOptionsWhere<ActionRunEntity> = status ? { status } : {};
    const after = decodeCursor(filter.cursor, isPair);
    if (after) {
      // Keyset pagination on (created_at, id), newest first: stable while runs change.
      where.push({ ...base, createdAt: LessThan(after[0]) }, { ...base, createdAt: after[0], id: LessThan(after[1]) });
    } else {
      where.push(base);
    }
    const rows = (status && (await this.walkedRuns(status, after, limit + 1))) ||
      (await this.runs.find({ where, order: { createdAt: 'DESC', id: 'DESC' }, take: limit + 1 }));
    return toPage(rows, limit, actionRunView, (r) => [r.createdAt, r.id]);
  }

  /** SQLite: a page of a common status, walked newest first instead of sorted (runs-by-status.ts); undefined otherwise. */
  private async walkedRuns(status: ActionRunStatus, after: [string, string] | undefined, take: number): Promise<ActionRunEntity[] | undefined> {
    if (kindOf(this.runs.manager.connection) !== 'sqlite') return undefined;
    const ids = await walkedPageIds(this.runs.manager, status, after, take);
    if (ids === undefined) return undefined;
    const byId = new Map((ids.length > 0 ? await this.runs.findBy({ id: In(ids) }) : []).map((run) => [run.id, run]));
    // A run deleted between the two reads (retention) is left out.
    return ids.map((id) => byId.get(id)).filter((run): run is ActionRunEntity => run !== undefined);
  }
}
