/**
 * The filters of the event list and of its live feed, checked once and applied
 * two ways: as a database condition (the list) and as a test of one row (the
 * feed). `resource` is `kind:id` (`task:tsk_1`), or a bare id of any kind;
 * `rule` keeps the events a rule was evaluated for (it listened and the index
 * did not rule it out); `since`/`until` bound the time received.
 */
import { And, In, LessThanOrEqual, MoreThanOrEqual, Raw, type FindOperator, type FindOptionsWhere } from 'typeorm';
import type { EventEntity, EventStatus } from '../database/event.entity.js';
import { invalid, type FieldProblem } from '../http/json-body.js';

export const EVENT_STATUSES: EventStatus[] = ['received', 'processed', 'ignored', 'failed', 'loop_blocked'];
const RESOURCE_KINDS = ['task', 'project', 'user', 'workflow_run'];

export interface EventFilter {
  type?: string;
  status?: EventStatus;
  resources?: string[];
  rule?: string;
  since?: string;
  until?: string;
}

type Query = Record<string, string | undefined>;

const given = (v: string | undefined): v is string => v !== undefined && v !== '';

function isoOf(raw: string, name: string, problems: FieldProblem[]): string | undefined {
  const ms = Date.parse(raw);
  if (Number.isNaN(ms)) {
    problems.push({ path: name, message: 'must be an ISO-8601 date-time' });
    return undefined;
  }
  return new Date(ms).toISOString();
}

export function parseEventFilter(query: Query): EventFilter {
  const problems: FieldProblem[] = [];
  const filter: EventFilter = {};
  if (given(query.type)) filter.type = query.type;
  if (given(query.status)) {
    if (EVENT_STATUSES.includes(query.status as EventStatus)) filter.status = query.status as EventStatus;
    else problems.push({ path: 'status', message: `must be one of ${EVENT_STATUSES.join(', ')}` });
  }
  if (given(query.resource)) {
    const resource = query.resource.trim();
    filter.resources = resource.includes(':') ? [resource] : RESOURCE_KINDS.map((kind) => `${kind}:${resource}`);
  }
  if (given(query.rule)) filter.rule = query.rule;
  if (given(query.since)) filter.since = isoOf(query.since, 'since', problems);
  if (given(query.until)) filter.until = isoOf(query.until, 'until', problems);
  if (problems.length > 0) {
    throw invalid(problems.length === 1 && problems[0].path === 'status' ? `status must be one of ${EVENT_STATUSES.join(', ')}` : 'the event filter has problems', problems);
  }
  return filter;
}

/** The fragment of stored explanations that names a rule evaluated for the event. */
export function ruleMarker(rule: string): string {
  return `"rule":${JSON.stringify(rule)}`;
}

const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

export function eventWhere(filter: EventFilter): FindOptionsWhere<EventEntity> {
  const where: FindOptionsWhere<EventEntity> = {};
  if (filter.type) where.type = filter.type;
  if (filter.status) where.status = filter.status;
  if (filter.resources) where.resourceKey = filter.resources.length === 1 ? filter.resources[0] : In(filter.resources);
  if (filter.rule) {
    const pattern = `%${likeEscape(ruleMarker(filter.rule))}%`;
    where.explanation = Raw((column) => `${column} LIKE :rulePattern ESCAPE '\\'`, { rulePattern: pattern });
  }
  const bounds: FindOperator<string>[] = [];
  if (filter.since) bounds.push(MoreThanOrEqual(filter.since));
  if (filter.until) bounds.push(LessThanOrEqual(filter.until));
  if (bounds.length > 0) where.receivedAt = bounds.length === 1 ? bounds[0] : And(...bounds);
  return where;
}

export function eventMatches(filter: EventFilter, e: EventEntity): boolean {
  if (filter.type && e.type !== filter.type) return false;
  if (filter.status && e.status !== filter.status) return false;
  if (filter.resources && !filter.resources.includes(e.resourceKey ?? '')) return false;
  if (filter.rule && !(e.explanation ?? '').includes(ruleMarker(filter.rule))) return false;
  if (filter.since && e.receivedAt < filter.since) return false;
  if (filter.until && e.receivedAt > filter.until) return false;
  return true;
}


