/**
 * The facts rule conditions can read (SPEC 5): `event`, `now`, `changes`, and
 * the service lookups `project`, `user` and `tasks`.
 *
 * One `EventFacts` lives for one event and is shared by every rule evaluated
 * for it: it holds the event, the clock instant, the changes, and a cache of
 * lookup promises keyed by fact name and rendered id, so each lookup is made at
 * most once per event whatever the number of rules asking for it.
 *
 * json-rules-engine reads facts through an Almanac. `RULE_FACTS` are dynamic
 * facts defined once for the whole process; they find the current event's
 * values through the `EventAlmanac` they are called with, so no per-event or
 * per-rule Fact objects are built and the event is never copied. Their
 * priorities make json-rules-engine test local facts before remote ones, so a
 * lookup happens only when the cheap conditions did not already decide.
 */
import { isDeepStrictEqual } from 'node:util';
import { Almanac, Fact, type PathResolver } from 'json-rules-engine';
import { isObject } from '../json.js';
import { nowFact, type NowFact } from './now.js';
import { templateContext } from './template-context.js';
import { renderString } from './template.js';

/** The service lookups, the boundary to the remote service. */
export interface Lookups {
  project(id: string): Promise<unknown>;
  user(id: string): Promise<unknown>;
  tasks(projectId: string): Promise<unknown[]>;
}

/** What the rules see of an event: the envelope, at least its type. */
export interface RuleEvent {
  type: string;
  data?: unknown;
}

export type Changes = Record<string, { from: unknown; to: unknown }>;

const LOOKUPS = {
  project: { param: 'id', fetch: (lookups: Lookups, id: string) => lookups.project(id) },
  user: { param: 'id', fetch: (lookups: Lookups, id: string) => lookups.user(id) },
  tasks: { param: 'project_id', fetch: (lookups: Lookups, id: string) => lookups.tasks(id) },
} as const;
export type LookupName = keyof typeof LOOKUPS;

export const FACT_NAMES: ReadonlySet<string> = new Set(['event', 'now', 'changes', ...Object.keys(LOOKUPS)]);

/** Facts that cost a call to the service. */
export function isRemoteFact(name: string): boolean {
  return Object.hasOwn(LOOKUPS, name);
}

// ---- changes -------------------------------------------------------------

/**
 * The `changes` fact: what the service sent in `data.changes` when it is an
 * object, else the shallow difference between the resource's previous
 * snapshot and the current one. A missing field counts as null, so a field
 * going from null to absent is no change. No previous snapshot: `{}`.
 */
export function computeChanges(current: object | undefined, previous: object | undefined, sent?: unknown): Changes {
  if (isObject(sent)) return sent as Changes;
  if (!isObject(previous)) return {};
  const now: Record<string, unknown> = isObject(current) ? current : {};
  const entries: Array<[string, { from: unknown; to: unknown }]> = [];
  for (const field of new Set([...Object.keys(previous), ...Object.keys(now)])) {
    const from = Object.hasOwn(previous, field) ? previous[field] ?? null : null;
    const to = Object.hasOwn(now, field) ? now[field] ?? null : null;
    if (!isDeepStrictEqual(from, to)) entries.push([field, { from, to }]);
  }
  return Object.fromEntries(entries); // defines own keys: a `__proto__` field stays a field
}

// ---- paths ---------------------------------------------------------------

const SIMPLE_PATH = /^\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])+$/;
const SEGMENT = /\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]/g;
const parsedPaths = new Map<string, readonly string[] | null>();

/** `$.a.b[0].c` → `['a', 'b', '0', 'c']`; null for anything JSONPath-specific. */
export function parseSimplePath(path: string): readonly string[] | null {
  let segments = parsedPaths.get(path);
  if (segments === undefined) {
    segments = SIMPLE_PATH.test(path) ? Array.from(path.matchAll(SEGMENT), (m) => m[1] ?? m[2]) : null;
    if (parsedPaths.size >= 10_000) parsedPaths.clear();
    parsedPaths.set(path, segments);
  }
  return segments;
}

/** Follows own properties only, exactly as jsonpath-plus does for such paths (see the spec). */
export function readPath(value: unknown, segments: readonly string[]): unknown {
  let current = value;
  for (const segment of segments) {
    if (!current || !Object.hasOwn(current as object, segment)) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

// jsonpath-plus costs ~8 µs per call, about half of a rule's evaluation; the
// plain paths rules nearly always use are read directly, the rest still go to
// json-rules-engine's own resolver (not exported, hence taken from an Almanac).
const jsonPathResolver = (new Almanac() as unknown as { pathResolver: PathResolver }).pathResolver;
if (typeof jsonPathResolver !== 'function') throw new Error('json-rules-engine: default path resolver not found');

export const resolvePath: PathResolver = (value, path) => {
  const segments = parseSimplePath(path);
  return segments === null ? jsonPathResolver(value, path) : readPath(value, segments);
};

// ---- per-event facts -----------------------------------------------------

export interface EventFactsOptions {
  /** The clock's instant for this event. */
  now: Date;
  lookups: Lookups;
  /** Precomputed with computeChanges; default: the event's own `data.changes`, else `{}`. */
  changes?: Changes;
  /** Zone of `now` for rules without their own; default UTC. */
  timezone?: string;
}

/** Who is asking: templates in lookup params may use `rule` and `now`. */
export interface FactScope {
  rule: { id: string; name?: string };
  timezone?: string;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class EventFacts {
  private readonly changesValue: Changes;
  /** Whether anything has read `changes` (EventProcessor: an evaluation that did depends on the resource's snapshot). */
  changesRead = false;
  private readonly nowByZone = new Map<string, NowFact>();
  private readonly lookupResults = new Map<string, Promise<unknown>>();

  constructor(
    readonly event: RuleEvent,
    private readonly options: EventFactsOptions,
  ) {
    const data = isObject(event.data) ? event.data : undefined;
    this.changesValue = options.changes ?? computeChanges(undefined, undefined, data?.changes);
  }

  get changes(): Changes {
    this.changesRead = true;
    return this.changesValue;
  }

  now(timeZone = this.options.timezone ?? 'UTC'): NowFact {
    let now = this.nowByZone.get(timeZone);
    if (now === undefined) {
      now = nowFact(this.options.now, timeZone);
      this.nowByZone.set(timeZone, now);
    }
    return now;
  }

  /** Rejects (never throws) on a bad param, a template error or a failed lookup. */
  lookup(name: LookupName, params: Record<string, unknown> | undefined, scope: FactScope): Promise<unknown> {
    let id: string;
    try {
      id = this.renderParam(name, params, scope);
    } catch (error) {
      return Promise.reject(new Error(`fact "${name}": ${messageOf(error)}`, { cause: error }));
    }
    const key = `${name}\u0000${id}`;
    let result = this.lookupResults.get(key);
    if (result === undefined) {
      result = this.fetch(name, id);
      this.lookupResults.set(key, result);
    }
    return result;
  }

  /** The lookup this event already made (or is making) with these params; never starts one. */
  madeLookup(name: LookupName, params: Record<string, unknown> | undefined, scope: FactScope): Promise<unknown> | undefined {
    let id: string;
    try {
      id = this.renderParam(name, params, scope);
    } catch {
      return undefined;
    }
    return this.lookupResults.get(`${name}\u0000${id}`);
  }

  private renderParam(name: LookupName, params: Record<string, unknown> | undefined, scope: FactScope): string {
    const param = LOOKUPS[name].param;
    const raw = params?.[param];
    if (typeof raw === 'number') return String(raw);
    if (typeof raw !== 'string') throw new Error(`needs params.${param} (a string)`);
    const context = templateContext(scope.rule, this.event, this.now(scope.timezone));
    const id = renderString(raw, context, `params.${param}`);
    if (id === '') throw new Error(`params.${param} rendered to an empty string`);
    return id;
  }

  private async fetch(name: LookupName, id: string): Promise<unknown> {
    try {
      return await LOOKUPS[name].fetch(this.options.lookups, id);
    } catch (error) {
      throw new Error(`${name} lookup "${id}" failed: ${messageOf(error)}`, { cause: error });
    }
  }
}

// ---- json-rules-engine glue ----------------------------------------------

/**
 * The Almanac for one rule's evaluation against one event. A failed lookup
 * resolves to undefined here and is recorded, so json-rules-engine still
 * returns every condition's result; the evaluator then fails the rule with it.
 */
export class EventAlmanac extends Almanac {
  readonly failures = new Map<string, string>();

  constructor(
    readonly facts: EventFacts,
    readonly scope: FactScope,
  ) {
    super({ allowUndefinedFacts: true, pathResolver: resolvePath });
    for (const fact of RULE_FACTS) this.addFact(fact);
  }

  lookup(name: LookupName, params: Record<string, unknown> | undefined): Promise<unknown> {
    return this.facts.lookup(name, params, this.scope).catch((error: unknown) => {
      this.failures.set(name, messageOf(error));
      return undefined;
    });
  }
}

/**
 * What the local walk (local-walk.ts) gives the rule facts instead of an Almanac: the event's facts and the rule's
 * scope. The walk reads no lookup, and an EventAlmanac (json-rules-engine's Almanac, with a map of every fact) cost
 * about 3,000 instructions to build for each rule an event meets.
 */
export class LocalFacts {
  constructor(
    readonly facts: EventFacts,
    readonly scope: FactScope,
  ) {}
}

function contextOf(almanac: Almanac | LocalFacts): EventAlmanac | LocalFacts {
  if (almanac instanceof EventAlmanac || almanac instanceof LocalFacts) return almanac;
  throw new Error('rule facts need an EventAlmanac or a LocalFacts: evaluate rules with rule-evaluator');
}

/** Lookups are asked of an EventAlmanac only (json-rules-engine's walk): the local walk never meets one. */
function almanacOf(almanac: Almanac | LocalFacts): EventAlmanac {
  if (almanac instanceof EventAlmanac) return almanac;
  throw new Error('a lookup needs an EventAlmanac: rules with lookups are walked by json-rules-engine');
}

/** json-rules-engine runs higher priorities first; lookups go last. */
export const LOCAL_FACT_PRIORITY = 10;
export const REMOTE_FACT_PRIORITY = 1;
// The almanac's own cache is off: facts are per event already, and lookups cache in EventFacts.
const local = { cache: false, priority: LOCAL_FACT_PRIORITY };
const remote = { cache: false, priority: REMOTE_FACT_PRIORITY };

export const RULE_FACTS: readonly Fact[] = [
  new Fact('event', (_params, almanac) => contextOf(almanac).facts.event, local),
  new Fact('changes', (_params, almanac) => contextOf(almanac).facts.changes, local),
  new Fact(
    'now',
    (params, almanac) => {
      const { facts, scope } = contextOf(almanac);
      return facts.now(typeof params.timezone === 'string' ? params.timezone : scope.timezone);
    },
    local,
  ),
  ...(Object.keys(LOOKUPS) as LookupName[]).map(
    (name) => new Fact(name, (params, almanac) => almanacOf(almanac).lookup(name, params), remote),
  ),
];
