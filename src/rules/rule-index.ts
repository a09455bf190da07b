/**
 * Which rules to evaluate for an event, without looking at the rules that
 * cannot match.
 *
 * Two levels, both built once per rule set:
 * 1. By event type. A trigger is an exact type or a pattern where `*` stands
 *    for exactly one dot-separated segment. The rules listening to a type are
 *    resolved on its first event and cached, so later events of that type cost
 *    one Map lookup.
 * 2. By an equality the rule requires. A rule whose top-level `all` holds
 *    `{fact: "event", path: "$.a.b", operator: "equal", value: <literal>}` can
 *    only match events carrying that value, so within a type's bucket rules are
 *    grouped by (path, value): for an event each distinct path is read once and
 *    only the rules filed under the value found are taken. A cron rule is filed
 *    the same way under its own `data.rule_id`, so a tick fires only its rule.
 * The rules skipped at level 2 are listed only on request (explanations):
 * building 10,000 entries per event on the hot path would cost more than the
 * matching itself.
 */
import type { LoadedRule, TopLevelCondition } from './rule.types.js';
import { parseSimplePath, readPath, type RuleEvent } from './facts.js';

type Literal = string | number | boolean;

export interface EqualityCondition {
  fact: 'event';
  path: string;
  operator: 'equal';
  value: Literal;
}

export interface ExcludedRule {
  rule: LoadedRule;
  /** The condition the event failed… */
  condition: EqualityCondition;
  /** …with the value the event had there. */
  factValue: unknown;
}

export interface Candidates {
  /** Rules to evaluate, by priority (higher first) then id. Shared: do not mutate. */
  evaluate: readonly LoadedRule[];
  /** Rules of the type skipped by the equality pre-filter; empty unless `explainExcluded`. */
  excluded: ExcludedRule[];
}

export interface CandidateOptions {
  explainExcluded?: boolean;
}

interface PathFilter {
  path: string;
  segments: readonly string[];
  byValue: Map<Literal, LoadedRule[]>;
}

interface Bucket {
  /** Every rule listening to the type. */
  all: readonly LoadedRule[];
  /** Rules without a usable equality: always evaluated. */
  unfiltered: readonly LoadedRule[];
  filters: readonly PathFilter[];
}

/** `task.*` matches `task.completed`, not `task.run.completed`; `*` matches one-segment types. */
export function triggerMatches(pattern: string, type: string): boolean {
  if (!pattern.includes('*')) return pattern === type;
  const want = pattern.split('.');
  const have = type.split('.');
  return want.length === have.length && want.every((segment, i) => segment === '*' || segment === have[i]);
}

export function byPriorityThenId(a: LoadedRule, b: LoadedRule): number {
  return b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function isLiteral(value: unknown): value is Literal {
  if (typeof value === 'string') return !value.includes('{{') && !value.includes('{%');
  return typeof value === 'number' || typeof value === 'boolean';
}

/** The equality the pre-filter can use for a rule, if any. */
export function equalityConditionOf(rule: LoadedRule): EqualityCondition | null {
  if (rule.definition.schedule !== undefined && rule.triggers.includes('schedule.fired')) {
    return { fact: 'event', path: '$.data.rule_id', operator: 'equal', value: rule.id };
  }
  const conditions: TopLevelCondition | undefined = rule.definition.conditions;
  if (conditions === undefined || !('all' in conditions)) return null;
  for (const condition of conditions.all) {
    if (!('fact' in condition) || condition.fact !== 'event' || condition.operator !== 'equal') continue;
    const { path, value } = condition;
    if (path !== undefined && parseSimplePath(path) !== null && isLiteral(value)) {
      return { fact: 'event', path, operator: 'equal', value };
    }
  }
  return null;
}

// Types come from signed webhooks, so they are few; the cap only keeps a
// misbehaving sender from growing the cache without bound.
const TYPE_CACHE_SIZE = 10_000;

export class RuleIndex {
  private readonly exact = new Map<string, LoadedRule[]>();
  /** Patterns with a `*`, by segment count: only those can match a type of that length. */
  private readonly wildcards = new Map<number, Map<string, LoadedRule[]>>();
  private readonly equalities = new Map<LoadedRule, EqualityCondition>();
  private readonly buckets = new Map<string, Bucket>();
  readonly rules: readonly LoadedRule[];

  constructor(rules: readonly LoadedRule[]) {
    this.rules = rules.filter((rule) => rule.enabled && rule.triggers.length > 0).sort(byPriorityThenId);
    for (const rule of this.rules) {
      for (const pattern of new Set(rule.triggers)) this.file(pattern, rule);
      const equality = equalityConditionOf(rule);
      if (equality !== null) this.equalities.set(rule, equality);
    }
  }

  get size(): number {
    return this.rules.length;
  }

  candidates(event: RuleEvent, options: CandidateOptions = {}): Candidates {
    const bucket = this.bucketFor(event.type);
    if (bucket.filters.length === 0) return { evaluate: bucket.all, excluded: [] };
    const values = bucket.filters.map((filter) => readPath(event, filter.segments));
    const evaluate = this.select(bucket, values);
    const excluded = options.explainExcluded ? this.explain(bucket, values) : [];
    return { evaluate, excluded };
  }

  private file(pattern: string, rule: LoadedRule): void {
    let byPattern = this.exact;
    if (pattern.includes('*')) {
      const length = pattern.split('.').length;
      byPattern = this.wildcards.get(length) ?? new Map<string, LoadedRule[]>();
      this.wildcards.set(length, byPattern);
    }
    const list = byPattern.get(pattern);
    if (list === undefined) byPattern.set(pattern, [rule]);
    else list.push(rule);
  }

  private bucketFor(type: string): Bucket {
    let bucket = this.buckets.get(type);
    if (bucket === undefined) {
      bucket = this.buildBucket(type);
      if (this.buckets.size >= TYPE_CACHE_SIZE) this.buckets.clear();
      this.buckets.set(type, bucket);
    }
    return bucket;
  }

  private buildBucket(type: string): Bucket {
    const listening = new Set(this.exact.get(type));
    for (const [pattern, rules] of this.wildcards.get(type.split('.').length) ?? []) {
      if (triggerMatches(pattern, type)) for (const rule of rules) listening.add(rule);
    }
    const all = [...listening].sort(byPriorityThenId);
    const unfiltered: LoadedRule[] = [];
    const filters = new Map<string, PathFilter>();
    for (const rule of all) {
      const equality = this.equalities.get(rule);
      if (equality === undefined) {
        unfiltered.push(rule);
        continue;
      }
      let filter = filters.get(equality.path);
      if (filter === undefined) {
        filter = { path: equality.path, segments: parseSimplePath(equality.path) ?? [], byValue: new Map() };
        filters.set(equality.path, filter);
      }
      const list = filter.byValue.get(equality.value);
      if (list === undefined) filter.byValue.set(equality.value, [rule]);
      else list.push(rule); // `all` is sorted, so every list is too
    }
    return { all, unfiltered, filters: [...filters.values()] };
  }

  /** `values[i]` is the event's value at `bucket.filters[i].path`. */
  private select(bucket: Bucket, values: unknown[]): readonly LoadedRule[] {
    const parts: (readonly LoadedRule[])[] = bucket.unfiltered.length > 0 ? [bucket.unfiltered] : [];
    bucket.filters.forEach((filter, i) => {
      // Map keys compare like `===` (the `equal` operator) for literals.
      const rules = filter.byValue.get(values[i] as Literal);
      if (rules !== undefined) parts.push(rules);
    });
    if (parts.length === 0) return [];
    if (parts.length === 1) return parts[0]; // each part is already in order
    return parts.flat().sort(byPriorityThenId);
  }

  private explain(bucket: Bucket, values: unknown[]): ExcludedRule[] {
    const excluded: ExcludedRule[] = [];
    bucket.filters.forEach((filter, i) => {
      for (const [value, rules] of filter.byValue) {
        if (value === values[i]) continue;
        for (const rule of rules) {
          excluded.push({ rule, condition: this.equalities.get(rule)!, factValue: values[i] });
        }
      }
    });
    return excluded.sort((a, b) => byPriorityThenId(a.rule, b.rule));
  }
}
