/**
 * Backtest: rules (a proposed change, or the files as they are now) run as a
 * dry run against stored events, next to what actually happened to each event.
 * Events are replayed in the order received, so the `changes` fact sees the
 * previous version of each resource as it was then. Lookups answer with the
 * service's data of today, which the report says.
 */
import { In, MoreThanOrEqual, LessThanOrEqual, Not, type EntityManager, type FindOptionsWhere, And } from 'typeorm';
import { EventEntity } from '../database/event.entity.js';
import { type EventEnvelope } from '../intake/envelope.js';
import { safeJsonParse } from '../json.js';
import { computeChanges, EventFacts, type Lookups } from '../rules/facts.js';
import { evaluateEvent } from '../rules/rule-evaluator.js';
import { RuleIndex } from '../rules/rule-index.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { previewActions, type ActionPreview } from './dry-run.js';

export interface BacktestFilter {
  type?: string;
  since?: string;
  until?: string;
  limit?: number;
}

export interface BacktestEventReport {
  event: { id: string; type: string; received_at: string; status: string };
  would_match: Array<{ rule: string; actions: ActionPreview[] }>;
  matched_then: Array<{ rule: string; rule_version: string; status: string }>;
  differences: { newly_matched: string[]; no_longer_matched: string[] };
  errors?: Array<{ rule: string; error: string }>;
  /** Rules the live engine would not evaluate for this event, and why (as its explanation says). */
  ignored?: Array<{ rule: string; reason: 'self_caused' | 'loop_blocked' }>;
}

export interface BacktestReport {
  events: BacktestEventReport[];
  summary: {
    events: number;
    would_match: number;
    matched_then: number;
    differing: number;
    rules: Record<string, { would_match: number; matched_then: number }>;
  };
  notes: string[];
}

export const BACKTEST_DEFAULT_LIMIT = 200;
export const BACKTEST_MAX_LIMIT = 5_000;

export async function runBacktest(
  manager: EntityManager,
  rules: LoadedRule[],
  filter: BacktestFilter,
  deps: { lookups: () => Lookups; now: Date; maxForEachItems?: number },
): Promise<BacktestReport> {
  const events = await storedEvents(manager, filter);
  const executions = events.length
    ? await manager.find(ExecutionEntity, { where: { eventSeq: In(events.map((e) => e.seq)) } })
    : [];
  const index = new RuleIndex(rules);
  const considered = new Set(rules.map((r) => r.id));
  const snapshots = new Map<string, Record<string, unknown>>();
  const reports: BacktestEventReport[] = [];
  for (const stored of events) {
    const envelope = safeJsonParse(stored.payload) as EventEnvelope;
    const changes = changesFor(envelope, stored.resourceKey, snapshots);
    const facts = new EventFacts(envelope, { now: deps.now, lookups: deps.lookups(), changes });
    const outcome = await replay(index, stored, envelope, facts, { now: deps.now, maxForEachItems: deps.maxForEachItems });
    const then = executions.filter((x) => x.eventSeq === stored.seq);
    reports.push(eventReport(stored, outcome, then, considered));
  }
  return { events: reports, summary: summarise(reports), notes: NOTES };
}

const NOTES = [
  'Dry run: nothing was sent and nothing was stored.',
  'Lookups (project, user, tasks) answered with the service as it is now, not as it was when the event arrived; so did check steps and forEach sources.',
  'Delays are shown as their duration, not waited for.',
  'Differences compare only the rules backtested; matched_then lists every rule that matched then.',
  'The changes fact compares each resource with its previous version among the events backtested.',
  'Loop protection as recorded: a self-caused event is ignored by rules without allowSelfTriggered, a loop-blocked one by every rule.',
];

interface ReplayOutcome {
  wouldMatch: BacktestEventReport['would_match'];
  errors: Array<{ rule: string; error: string }>;
  ignored: NonNullable<BacktestEventReport['ignored']>;
}

/**
 * What the live engine would do with the event now: the same evaluation, with
 * the chain position the event had (a self-caused event is ignored by rules
 * that do not allow self-triggering; a loop-blocked one is evaluated by none).
 */
async function replay(
  index: RuleIndex,
  stored: EventEntity,
  envelope: EventEnvelope,
  facts: EventFacts,
  { now, maxForEachItems }: { now: Date; maxForEachItems?: number },
): Promise<ReplayOutcome> {
  const result: ReplayOutcome = { wouldMatch: [], errors: [], ignored: [] };
  if (stored.status === 'loop_blocked') {
    for (const rule of index.candidates(envelope).evaluate) result.ignored.push({ rule: rule.id, reason: 'loop_blocked' });
    return result;
  }
  const { evaluations } = await evaluateEvent(index, envelope, facts, { selfCaused: stored.selfCaused });
  for (const outcome of evaluations) {
    if (outcome.outcome === 'ignored_self_caused') result.ignored.push({ rule: outcome.rule.id, reason: 'self_caused' });
    if (outcome.error) result.errors.push({ rule: outcome.rule.id, error: outcome.error });
    if (outcome.matched) {
      result.wouldMatch.push({ rule: outcome.rule.id, actions: await previewActions(outcome.rule, envelope, now, { facts, maxForEachItems }) });
    }
  }
  return result;
}

async function storedEvents(manager: EntityManager, filter: BacktestFilter): Promise<EventEntity[]> {
  const where: FindOptionsWhere<EventEntity> = { status: Not('received') };
  if (filter.type) where.type = filter.type;
  if (filter.since && filter.until) where.receivedAt = And(MoreThanOrEqual(filter.since), LessThanOrEqual(filter.until));
  else if (filter.since) where.receivedAt = MoreThanOrEqual(filter.since);
  else if (filter.until) where.receivedAt = LessThanOrEqual(filter.until);
  const limit = Math.min(filter.limit ?? BACKTEST_DEFAULT_LIMIT, BACKTEST_MAX_LIMIT);
  // The most recent `limit` events, replayed oldest first.
  const newest = await manager.find(EventEntity, { where, order: { seq: 'DESC' }, take: limit });
  return newest.reverse();
}

function changesFor(envelope: EventEnvelope, resourceKey: string | null, snapshots: Map<string, Record<string, unknown>>) {
  if (!resourceKey) return computeChanges(undefined, undefined, envelope.data?.changes);
  const kind = resourceKey.slice(0, resourceKey.indexOf(':'));
  const current = envelope.data?.[kind] as Record<string, unknown> | undefined;
  const changes = computeChanges(current, snapshots.get(resourceKey), envelope.data?.changes);
  if (current) snapshots.set(resourceKey, current);
  return changes;
}

function eventReport(
  stored: EventEntity,
  { wouldMatch, errors, ignored }: ReplayOutcome,
  then: ExecutionEntity[],
  considered: Set<string>,
): BacktestEventReport {
  const now = new Set(wouldMatch.map((m) => m.rule));
  // Only the rules under test are compared: other rules that matched then are shown, not counted as differences.
  const before = new Set(then.map((x) => x.ruleId).filter((id) => considered.has(id)));
  const report: BacktestEventReport = {
    event: { id: stored.eventId, type: stored.type, received_at: stored.receivedAt, status: stored.status },
    would_match: wouldMatch,
    matched_then: then.map((x) => ({ rule: x.ruleId, rule_version: x.ruleVersion, status: x.status })),
    differences: {
      newly_matched: [...now].filter((id) => !before.has(id)),
      no_longer_matched: [...before].filter((id) => !now.has(id)),
    },
  };
  if (errors.length > 0) report.errors = errors;
  if (ignored.length > 0) report.ignored = ignored;
  return report;
}

function summarise(reports: BacktestEventReport[]): BacktestReport['summary'] {
  const rules: BacktestReport['summary']['rules'] = {};
  const bump = (id: string, key: 'would_match' | 'matched_then') => {
    rules[id] ??= { would_match: 0, matched_then: 0 };
    rules[id][key]++;
  };
  for (const r of reports) {
    for (const m of r.would_match) bump(m.rule, 'would_match');
    for (const m of r.matched_then) bump(m.rule, 'matched_then');
  }
  return {
    events: reports.length,
    would_match: reports.filter((r) => r.would_match.length > 0).length,
    matched_then: reports.filter((r) => r.matched_then.length > 0).length,
    differing: reports.filter((r) => r.differences.newly_matched.length + r.differences.no_longer_matched.length > 0).length,
    rules,
  };
}
