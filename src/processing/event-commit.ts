/**
 * The commit of an evaluated event, in the transaction its batch shares: the
 * event's outcome and explanation (only while this worker still holds the
 * event's lease), an execution per matched rule (or `throttled`) with its first
 * action run, and the resource snapshot the next event's `changes` is computed
 * from. Plain statements (database/statements.ts): this runs for every event.
 *
 * A first action run's request is rendered here, from the event in hand, and
 * stored with the run (it is sent unchanged on every attempt); when it names
 * the resource it will change, that resource's provenance is recorded in the
 * same commit, so the service's webhook about the change finds it however
 * soon it arrives. First runs may be leased to this process in the same
 * commit and handed to its action loop directly, so the normal path needs no
 * claim; the claim query remains for retries, recovery and other replicas.
 */
import { randomFillSync } from 'node:crypto';
import { isoString } from '../clock.js';
import type { DatabaseKind } from '../database/data-source.js';
import { planEachTime, planOnceByKey } from '../database/planned-once.js';
import type { Statements } from '../database/statements.js';
import { unindexed } from '../database/sql.js';
import type { Metrics } from '../observability/metrics.js';
import { BatchedStatements, guardedRowsOf, unnestOf, type Batched } from './batched-statements.js';
import { emitLoopBlocked } from './engine-events.js';
import { FIRST_RUN_COLUMNS, FIRST_RUN_TYPES, firstEntryOf, INSERT_FIRST_RUN, insertFirstRun, type FirstEntry } from './first-entry.js';
import { cancelWaitingFor, debounceEarlier } from './waiting.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedEvent, CreatedRun, HandOff, LoadedExecution, PreparedEvent, RuleExplanation, Verdict, VerdictMatch } from './work.js';

const FINISH_EVENT = `
  UPDATE events SET status = ?, depth = ?, self_caused = ?, error = ?, processed_at = ?, attempts = ?,
                    next_attempt_at = ?, explanation = ?, lease_owner = NULL, lease_until = NULL
  WHERE seq = ? AND lease_owner = ? AND status = 'received'`;
export const INSERT_EXECUTION = `
  INSERT INTO executions (id, event_seq, event_id, rule_id, rule_version, status, conditions, rule_snapshot, error,
                          throttle_key, created_at, finished_at, resume_at, debounce_key, facts)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)`;
export const SAVE_SNAPSHOT = `
  INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (resource_key) DO UPDATE SET payload = excluded.payload, event_seq = excluded.event_seq, updated_at = excluded.updated_at`;
/**
 * The resource is seen now: events waiting about it no longer wait behind the causal barrier (PostgreSQL). Its status
 * and seen flag `unindexed` (sql.ts), so that the rows are found by resource key (idx_events_resource_seq: only the
 * first snapshot of a resource marks, so its history is short). Planned on young statistics from the plain conditions,
 * it walked the partial index of every waiting unseen event (idx_events_waiting_scope), or the status index, and
 * filtered it by resource (young-statistics.spec.ts).
 */
export const unseenWaiting = (row = '') => `${unindexed(`${row}status`)} = 'received' AND NOT ${unindexed(`${row}seen_resource`, 'FALSE')}`;
const MARK_SEEN = `UPDATE events SET seen_resource = TRUE WHERE resource_key = ? AND ${unseenWaiting()}`;
/**
 * MARK_SEEN for a batch's resources (PostgreSQL): one lookup by key for each (`OFFSET 0` keeps the lookup inside the
 * loop over the keys). As one `resource_key = ANY(…)`, the planner costs a descent of the index per key and, while the
 * table is a few thousand rows, reads the whole table instead: in the first seconds of a run, most of the rows read
 * per event.
 */
export const MARK_SEEN_MANY = `UPDATE events SET seen_resource = TRUE WHERE ${unseenWaiting()} AND seq = ANY(ARRAY(
  SELECT w.seq FROM unnest(?::text[]) AS k(key)
  CROSS JOIN LATERAL (SELECT u.seq FROM events u WHERE u.resource_key = k.key AND ${unseenWaiting('u.')} OFFSET 0) w))`;
// SQLite (no statistics) would walk the status index through every waiting event: name the index of the resource's
// waiting events (its index of all events would walk the resource's whole history). On the UPDATE itself: as
// `seq IN (SELECT … INDEXED BY …)` it built a temporary table of the seqs first, 6.8 µs a call instead of 3.3 when no
// event is waiting, which is almost always (seen_resource is in neither the index nor its predicate, so the rows are
// changed as the index is walked).
const MARK_SEEN_SQLITE = `UPDATE events INDEXED BY idx_events_waiting_resource SET seen_resource = TRUE
  WHERE resource_key = ? AND status = 'received' AND NOT seen_resource`;
const THROTTLE_LOCK = 'SELECT pg_advisory_xact_lock(hashtext(?))';
/** How many executions of a rule with a throttle key count against its limit (idx_executions_throttle, its only reader). */
export const THROTTLE_COUNT = `
  SELECT COUNT(*) AS n FROM executions
  WHERE rule_id = ? AND throttle_key = ? AND created_at > ? AND status <> 'throttled'`;

/** FINISH_EVENT for a whole batch (PostgreSQL): the columns as arrays, the seqs of the events still leased to us back. */
export const FINISH_MANY_TYPES = ['text', 'int', 'bool', 'text', 'text', 'int', 'text', 'text', 'int', 'text'];
export const FINISH_MANY_COLUMNS = ['status', 'depth', 'self_caused', 'error', 'processed_at', 'attempts', 'next_attempt_at', 'explanation', 'seq', 'owner'];
// The seqs a second time, as `= ANY`: the planner then probes the primary key. Joined only through `t`, on the
// statistics of a table seconds old, it ANDed a bitmap of every waiting event (idx_events_status_seq) into it.
// The status `unindexed` (sql.ts), so that no index of events by status competes with the seqs; the guards against
// `t` (batched-statements.ts `guardedRowsOf`), so that the join with the batch's rows is not a nested loop.
export const FINISH_MANY = `
  UPDATE events e SET status = t.status, depth = t.depth, self_caused = t.self_caused, error = t.error, processed_at = t.processed_at,
                      attempts = t.attempts, next_attempt_at = t.next_attempt_at, explanation = t.explanation, lease_owner = NULL, lease_until = NULL
  FROM ${guardedRowsOf(FINISH_MANY_COLUMNS, FINISH_MANY_TYPES, { was: "'received'" })}
  WHERE e.seq = t.seq AND e.lease_owner = t.owner AND ${unindexed('e.status')} = t.was AND e.seq = ANY(?::int[])
  RETURNING e.seq`;

export const EXECUTION_COLUMNS = ['id', 'event_seq', 'event_id', 'rule_id', 'rule_version', 'status', 'conditions', 'rule_snapshot', 'throttle_key', 'created_at', 'finished_at', 'resume_at', 'debounce_key', 'facts'];
const text = (n: number) => Array<string>(n).fill('text');
const BATCHED = new Map<string, Batched>([
  [INSERT_EXECUTION, {
    types: [...text(1), 'int', ...text(12)],
    text: `INSERT INTO executions (${EXECUTION_COLUMNS.join(', ')}) SELECT * FROM ${unnestOf(EXECUTION_COLUMNS, [...text(1), 'int', ...text(12)])}`,
  }],
  [INSERT_FIRST_RUN, {
    types: FIRST_RUN_TYPES,
    text: `INSERT INTO action_runs (${FIRST_RUN_COLUMNS.join(', ')}) SELECT * FROM ${unnestOf(FIRST_RUN_COLUMNS, FIRST_RUN_TYPES)}`,
  }],
  [SAVE_SNAPSHOT, {
    types: ['text', 'text', 'int', 'text'],
    keyOf: (params) => params[0],
    text: `INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at)
           SELECT * FROM ${unnestOf(['resource_key', 'payload', 'event_seq', 'updated_at'], ['text', 'text', 'int', 'text'])}
           ON CONFLICT (resource_key) DO UPDATE SET payload = excluded.payload, event_seq = excluded.event_seq, updated_at = excluded.updated_at`,
  }],
  [MARK_SEEN, {
    types: ['text'],
    keyOf: (params) => params[0],
    text: MARK_SEEN_MANY,
  }],
]);

/** An event decided in the commit that stores it, once stored (EventProcessor.decideAtIntake). */
export interface DecidedRecord {
  seq: number;
  resourceKey: string | null;
  /** The resource's snapshot as saveSnapshot writes it (resourceSnapshotText), if any. */
  snapshot: string | undefined;
}

/** The text a resource's snapshot is saved as, if the event has one to save. */
export function resourceSnapshotText(resourceKey: string | null, resource: Record<string, unknown> | undefined): string | undefined {
  return resourceKey && resource ? JSON.stringify(resource) : undefined;
}

export interface NewExecution {
  id: string;
  match: VerdictMatch;
  throttled: boolean;
  snapshot: RuleSnapshot;
}

export class EventCommit {
  constructor(
    private readonly kind: DatabaseKind,
    private readonly dryRun: boolean,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Commits a batch of evaluated events. On PostgreSQL, when no matched rule
   * throttles, the events are finished with one statement and the rows they
   * create are written with one statement per table (batched-statements.ts);
   * otherwise event by event, in order (a throttle counts what came before).
   */
  async commitAll(sql: Statements, prepared: PreparedEvent[], owner: string, now: string, handOff?: HandOff): Promise<CreatedRun[]> {
    // A throttle counts, a debounce and a cancel-on look at what came before: those batches go event by event.
    const ordered = prepared.some((p) => (p.cancels?.length ?? 0) > 0 || p.verdict.matched.some((m) => m.rule.definition.options?.throttle || m.rule.definition.options?.debounce));
    const runs: CreatedRun[] = [];
    if (this.kind === 'sqlite' || ordered || prepared.length === 1) {
      for (const p of prepared) runs.push(...(await this.commit(sql, p, owner, now, handOff)));
      return runs;
    }
    const plans = prepared.map((p) => ({ p, executions: p.verdict.status === 'received' ? [] : newExecutions(p.verdict) }));
    const finished = await this.finishAll(sql, plans, owner, now);
    const batched = new BatchedStatements(sql, BATCHED);
    for (const { p, executions } of plans) {
      if (finished.has(p.claim.seq) && p.verdict.status !== 'received') runs.push(...(await this.record(batched, p, executions, now, handOff)));
    }
    // The batch's INSERTs and its seen mark find rows by key alone: planned once per session (planned-once.ts), where
    // planning each cost 0.47 ms of the server's time a commit, 12 µs an event end to end (session 30); the session's
    // own settings again for whatever follows in the transaction. (Not the UPDATE before them: planned once on a young
    // table's statistics, it joined its batch to the events as a nested loop, each row compared with every other.)
    planOnceByKey(sql);
    await batched.flush();
    planEachTime(sql);
    return runs;
  }

  /** Commits one event; the action runs it created, leased to `handOff` when given (none when the event's lease was lost). */
  async commit(sql: Statements, prepared: PreparedEvent, owner: string, now: string, handOff?: HandOff): Promise<CreatedRun[]> {
    const { claim, verdict } = prepared;
    const done = verdict.status !== 'received';
    const executions = done ? await this.decideThrottles(sql, verdict, now) : [];
    const finished = await sql.run(FINISH_EVENT, [...finishColumns(prepared, executions, now), claim.seq, owner]);
    if (!finished || !done) return [];
    return this.record(sql, prepared, executions, now, handOff);
  }

  private async finishAll(sql: Statements, plans: Array<{ p: PreparedEvent; executions: NewExecution[] }>, owner: string, now: string): Promise<Set<number>> {
    const rows = plans.map(({ p, executions }) => [...finishColumns(p, executions, now), p.claim.seq, owner]);
    const columns = FINISH_MANY_TYPES.map((_type, i) => rows.map((row) => row[i] ?? null));
    const seqs = plans.map(({ p }) => p.claim.seq);
    const finished = await sql.rows<{ seq: number }>(FINISH_MANY, [...columns, seqs]);
    return new Set(finished.map((row) => Number(row.seq)));
  }

  /** What a finished event created: its executions, their first runs, its resource's snapshot. */
  private async record(sql: Statements, prepared: PreparedEvent, executions: NewExecution[], now: string, handOff?: HandOff): Promise<CreatedRun[]> {
    const runs = await this.recordExecutions(sql, prepared, executions, now, handOff);
    await this.saveSnapshot(sql, prepared.claim, prepared.resource, now, !prepared.resourceKnown);
    this.metrics.eventProcessed(prepared.claim.type, prepared.verdict.status);
    return runs;
  }

  /** The explanation of an event decided at intake as stored, naming its executions. */
  explanationAtIntake(verdict: Verdict, executions: NewExecution[]): string {
    return JSON.stringify(explain(verdict.explanation, executions));
  }

  /**
   * What an event a rule matched, decided in the commit that stores it, writes once it has its seq: what `record`
   * writes for an event the loop commits (its executions, their first runs leased to `handOff` as far as it has room,
   * its resource's snapshot, with no event marked seen, as `recordDecided` says). Counted once that commit is done
   * (EventProcessor.countDecided); its rules' matches now, unless not `counted` (PostgreSQL writes them before it
   * knows whether the event is stored decided: made-at-intake.ts). The runs, and the snapshot saved, if any.
   */
  async recordAtIntake(
    sql: Statements,
    prepared: PreparedEvent,
    executions: NewExecution[],
    now: string,
    handOff: HandOff,
    counted = true,
  ): Promise<{ runs: CreatedRun[]; snapshot?: string }> {
    const runs = await this.recordExecutions(sql, prepared, executions, now, handOff, counted);
    return { runs, snapshot: await this.saveSnapshot(sql, prepared.claim, prepared.resource, now, false) };
  }

  private async recordExecutions(
    sql: Statements,
    { claim, verdict, envelope, cancels }: PreparedEvent,
    executions: NewExecution[],
    now: string,
    handOff?: HandOff,
    counted = true,
  ): Promise<CreatedRun[]> {
    const runs: CreatedRun[] = [];
    if (cancels && cancels.length > 0) await cancelWaitingFor(sql, claim, cancels, now);
    if (verdict.status === 'loop_blocked') await emitLoopBlocked(sql, claim, verdict.position.depth, now);
    for (const execution of executions) {
      const start = firstEntryOf(execution, envelope, now, this.dryRun);
      if (start.debounceKey !== null) await debounceEarlier(sql, this.kind, execution.match.rule.id, start.debounceKey, execution.id, now);
      await this.insertExecution(sql, claim, execution, start, now);
      if (counted) this.metrics.ruleMatched(execution.match.rule.id, execution.throttled ? 'throttled' : 'matched');
      if (execution.throttled) continue;
      const loaded: LoadedExecution = {
        id: execution.id, eventSeq: claim.seq, eventId: claim.event_id, ruleId: execution.match.rule.id, rule: execution.snapshot,
        eventType: claim.type, eventDepth: verdict.position.depth, facts: execution.match.facts,
      };
      // A run that waits is not handed over: it is claimed when due.
      const lease = handOff && handOff.room > 0 && start.resumeAt === null ? handOff : undefined;
      if (lease) lease.room--;
      const run = await insertFirstRun(sql, claim, loaded, start, now, lease);
      runs.push({ run, execution: loaded, leased: lease !== undefined });
    }
    return runs;
  }

  /**
   * The event's resource as it is now, for the next event's `changes`; the text saved, if any. `markSeen`: the events
   * waiting about the resource are marked seen (only its first snapshot can leave any unseen: PreparedEvent.resourceKnown).
   */
  private async saveSnapshot(
    sql: Statements,
    { resource_key: key, seq }: Pick<ClaimedEvent, 'resource_key' | 'seq'>,
    resource: Record<string, unknown> | undefined,
    now: string,
    markSeen: boolean,
  ): Promise<string | undefined> {
    const payload = resourceSnapshotText(key, resource);
    if (!key || payload === undefined) return undefined;
    await sql.run(SAVE_SNAPSHOT, [key, payload, seq, now]);
    if (markSeen) await sql.run(this.kind === 'sqlite' ? MARK_SEEN_SQLITE : MARK_SEEN, [key]);
    return payload;
  }

  /**
   * What an event decided in the commit that stores it writes after its row (intake's, event-writer.ts: stored
   * finished, it created nothing): its resource's snapshot, as `record` writes it. No event about the resource is
   * marked seen, as `record` marks them after a first snapshot: an event is decided only when none about its resource
   * waits before it (its lease, work-queue.ts FRESH_LEASE_SQLITE), and those stored after it see the snapshot.
   * Counted once that commit is done. (On PostgreSQL the statement that stores the event saves it: event-writer.ts.)
   */
  async recordDecided(sql: Statements, { seq, resourceKey, snapshot }: DecidedRecord, now: string): Promise<void> {
    if (resourceKey !== null && snapshot !== undefined) await sql.run(SAVE_SNAPSHOT, [resourceKey, snapshot, seq, now]);
  }

  /**
   * The executions of the verdict's matched rules, each counted against its throttle inside the transaction, under a
   * lock on (rule, key) on PostgreSQL, so concurrent events cannot both slip under the limit. Asked by `commit`, and by
   * intake's commit for an event it decides (EventProcessor.matchedAtIntake) before storing it: its explanation names them.
   */
  async decideThrottles(sql: Statements, verdict: Verdict, now: string): Promise<NewExecution[]> {
    const executions: NewExecution[] = [];
    for (const match of verdict.matched) {
      const throttle = match.rule.definition.options?.throttle;
      let throttled = false;
      if (throttle !== undefined && match.throttleKey !== null) {
        if (this.kind === 'postgres') await sql.rows(THROTTLE_LOCK, [`throttle:${match.rule.id}:${match.throttleKey}`]);
        const since = isoString(Date.parse(now) - throttle.windowSeconds * 1000);
        const [recent] = await sql.rows<{ n: number | string }>(THROTTLE_COUNT, [match.rule.id, match.throttleKey, since]);
        // Earlier events of the batch are in the table already: the batch commits them in order.
        throttled = Number(recent.n) >= throttle.limit;
      }
      executions.push({ id: executionId(), match, throttled, snapshot: snapshotOf(match) });
    }
    return executions;
  }


  private async insertExecution(sql: Statements, claim: ClaimedEvent, { id, match, throttled }: NewExecution, start: FirstEntry, now: string) {
    const status = throttled ? 'throttled' : start.resumeAt !== null ? 'waiting' : 'running';
    await sql.run(INSERT_EXECUTION, [
      id, claim.seq, claim.event_id, match.rule.id, match.rule.version, status,
      JSON.stringify(match.evaluation.conditions), snapshotJson(match), match.throttleKey, now, throttled ? now : null,
      throttled ? null : start.resumeAt, start.debounceKey, match.facts === undefined ? null : JSON.stringify(match.facts),
    ]);
  }
}

/** Random bytes for execution ids, drawn from the system's generator 4,000 at a time (randomFillSync), ten an id. */
const randomPool = Buffer.alloc(4_000);
let randomTaken = randomPool.length;

function randomHex(bytes: number): string {
  if (randomTaken + bytes > randomPool.length) {
    randomFillSync(randomPool);
    randomTaken = 0;
  }
  const hex = randomPool.toString('hex', randomTaken, randomTaken + bytes);
  randomTaken += bytes;
  return hex;
}

/**
 * A new execution's id: a time-ordered UUID (version 7, RFC 9562: 48 bits of milliseconds, then 74 random bits), so
 * a batch's executions, and the index of action runs by execution, grow at their end instead of taking one page each
 * at random (a random UUID made a commit of a batch write about half as many pages again). The random bits come from
 * a pool of the system's (as Node's `randomUUID` draws its own), written out with one `toString('hex')`: the
 * `uuid` package's v7 read fresh random bytes for each id (1.3 % of the engine's CPU under load), and a whole
 * `randomUUID` made and cut for its random part cost 23,000 instructions an id against 19,000 this way (counted
 * apart; the strings' slicing and joining is most of what is left).
 */
export function executionId(now = Date.now()): string {
  const ms = now.toString(16).padStart(12, '0');
  const random = randomHex(10);
  // The variant's digit (8, 9, a or b) keeps two random bits of the fourth digit.
  const variant = '89ab'[parseInt(random[3]!, 16) & 3];
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${random.slice(0, 3)}-${variant}${random.slice(4, 7)}-${random.slice(7, 19)}`;
}

/** Executions of an event none of whose rules throttles. */
export function newExecutions(verdict: Verdict): NewExecution[] {
  return verdict.matched.map((match) => ({ id: executionId(), match, throttled: false, snapshot: snapshotOf(match) }));
}

/** The event's columns as FINISH_EVENT sets them, in its order. */
export function finishColumns({ claim, verdict }: PreparedEvent, executions: NewExecution[], now: string): unknown[] {
  const done = verdict.status !== 'received';
  return [
    verdict.status, verdict.position.depth, verdict.position.selfCaused, verdict.error ?? null, done ? now : null,
    claim.attempts + (done ? 0 : 1), verdict.retryAt ?? now, JSON.stringify(explain(verdict.explanation, executions)),
  ];
}

/** A rule's snapshot as stored, by the loaded rule (the same for each of its executions; a reload loads new rules). */
const snapshotTexts = new WeakMap<VerdictMatch['rule'], string>();

/** The match's rule's snapshot as JSON, written once per rule: every execution of a rule version stores the same text. */
function snapshotJson(match: VerdictMatch): string {
  let text = snapshotTexts.get(match.rule);
  if (text === undefined) snapshotTexts.set(match.rule, (text = JSON.stringify(snapshotOf(match))));
  return text;
}

function snapshotOf({ rule }: VerdictMatch): RuleSnapshot {
  const snapshot: RuleSnapshot = { id: rule.id, name: rule.definition.name, version: rule.version, timezone: rule.definition.schedule?.timezone, actions: rule.definition.actions };
  const debounce = rule.definition.options?.debounce;
  if (debounce) snapshot.debounceSeconds = debounce.seconds;
  return snapshot;
}

/** The explanation as stored: each matched rule names its execution, and a throttled one says so. */
function explain(explanation: RuleExplanation[], executions: NewExecution[]): RuleExplanation[] {
  for (const { id, match, throttled } of executions) {
    const entry = explanation.find((e) => e.rule === match.rule.id);
    if (!entry) continue;
    entry.execution = id;
    if (throttled) entry.outcome = 'throttled';
  }
  return explanation;
}
