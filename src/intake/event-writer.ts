/**
 * Group commit for accepted events (database/group-commit.ts). Each caller's
 * event joins the batch being formed; one transaction of INSERT … ON CONFLICT
 * DO NOTHING (one statement for the batch on PostgreSQL, one per event on
 * SQLite) commits the whole batch, and only then is each caller told whether
 * its event was new or a duplicate.
 * Nothing is acknowledged before it is committed, and under load many events
 * share one transaction (one fsync) instead of paying one each. When the
 * database refuses the batch (a storage fault), every caller in it gets the
 * same refusal, 503 storage_unavailable: none of them was stored.
 *
 * The same commit leases the new events that the event loop may evaluate at
 * once (no earlier event about their resource waiting, nothing in flight that
 * could have caused them) to this process, and hands them over in memory after
 * the commit: the claim query is then the path for the rest (events that must
 * wait their turn, retries, recovery, other replicas), not the normal one.
 * An event so free that needs nothing but its evaluation is decided in that
 * commit instead (FreshEventsHandOff.decider): stored finished, with no commit
 * of the event loop's (on PostgreSQL only an event no rule matches).
 */
import { Inject, Injectable } from '@nestjs/common';
import type { CausalScope } from '../causal-scope.js';
import { CLOCK, nowIso, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import type { EventSource } from '../database/event.entity.js';
import { GroupCommit, type Answered } from '../database/group-commit.js';
import { planOnceByKey } from '../database/planned-once.js';
import { statementsOf, type Statements } from '../database/statements.js';
import type { EventEnvelope } from './envelope.js';
import { HAS_SNAPSHOT, INSERT_DECIDED, INSERT_MANY, INSERT_ONE, insertDecidingSql, leasedOne, lockResources } from './event-insert-sql.js';
import { requestsOnTheirWay } from './unread-connections.js';

export interface NewEvent {
  eventId: string;
  type: string;
  resourceKey: string | null;
  /** What could have caused it (causal-scope.ts); absent for events about no resource. */
  scope?: CausalScope | null;
  source: EventSource;
  payload: string;
  depth?: number;
  replayOf?: string | null;
  /** The payload as intake parsed it, so that the event loop need not parse it again to evaluate the event (in memory only). */
  envelope?: EventEnvelope;
}

export type WriteOutcome = 'accepted' | 'duplicate';

/**
 * How the commit that stores new events hands them to this process's event
 * loop (processing/workers.ts): the INSERT itself leases those the loop may
 * evaluate at once (`lease`: which, to whom), so a new event is written once,
 * already leased, and needs neither a claim nor an UPDATE of its own; `take`
 * gets them once the commit is done. `complete`: the loop had room for every
 * new event and none was a duplicate, so those not leased wait for something
 * else (an earlier event about their resource, a create in flight) that will
 * let them go, and no claim could take them now. (A new resource behind a
 * create in flight is leased all the same, `held`: the loop keeps it aside
 * until the create ends.)
 */
export interface FreshEventsHandOff<Made = never> {
  /**
   * Which of this commit's new events to lease; undefined: none (the loop is stopped, or has no room and no decider
   * asks). With room 0 (SQLite) it leases none, but says which events are free for the decider to decide.
   */
  lease(): FreshLease | undefined;
  /**
   * How the commit of `events` decides, one by one, an event the lease would hand over and free to be evaluated now
   * (not held): in the commit that stores it, when its evaluation needs nothing but the event and the database (no
   * lookup): stored finished, with what it made (DecidedEvent: on SQLite its executions and their first runs);
   * undefined: it is leased and handed over as before. Asked once per commit, before its first event is stored (what
   * it reads, it reads for the batch). On PostgreSQL, where the batch is one statement, every event is asked before
   * that statement (`decisionsOf`), and the statement stores decided those of them it finds free (insertDecidingSql).
   */
  decider?(sql: Statements, events: FreshEvent[], now: string): Promise<Decider<Made> | undefined>;
  /** After the commit: what it leased, what it decided (stored finished), and what those decided made. */
  take(leased: LeasedEvent[], complete: boolean, decided: FreshEvent[], made: Made[]): void;
}

/**
 * What decides a commit's new events (FreshEventsHandOff.decider), asked of each in the order they are stored: on
 * SQLite one that read the batch's resources first (BatchDecider), on PostgreSQL one that read nothing and says what
 * it assumed (AssumingDecider).
 */
export type Decider<Made = never> = BatchDecider<Made> | AssumingDecider<Made>;

interface DeciderOfEach<Made> {
  decide(event: FreshEvent): Promise<DecidedEvent<Made> | undefined>;
}

/** SQLite's, whose commit stores the batch event by event: it read the snapshots of the batch's resources first. */
export interface BatchDecider<Made = never> extends DeciderOfEach<Made> {
  /**
   * Whether the resource has a snapshot now, as the commit sees it: read for the batch's resources before its first
   * event, and kept up to date with the snapshots its decided events save. The commit's statements bind it instead of
   * probing resource_snapshots for it twice an event (the lease's `seen`, the row's `seen_resource`).
   */
  seen(resourceKey: string): boolean;
}

/**
 * PostgreSQL's, whose commit stores the batch in one statement: it reads nothing and evaluates each event as if its
 * resource had neither snapshot nor provenance; that statement checks what it assumed (insertDecidingSql).
 */
export interface AssumingDecider<Made = never> extends DeciderOfEach<Made> {
  /** Whether the evaluation of the event about the resource read its snapshot (through `changes`): it assumed none. */
  readSnapshot(resourceKey: string): boolean;
  /**
   * The event was leased, but what its evaluation assumed was not so (readSnapshot): its evaluation does not hold. (An
   * event leased held behind a create in flight whose evaluation's assumptions hold is not stale: its evaluation may
   * yet hold when the creates end, and the commit that lets it go checks them again.)
   */
  stale(eventId: string): void;
  /**
   * What the events decided so far made (their executions and first runs, with no seq yet), for the statement to
   * write: `sql`, definitions for its WITH after those of insertDecidingSql, over `stored` (the rows it stored, each
   * with its `seq`, `event_id` and whether `finished`), the same text for every commit, and `params`, their
   * placeholders' values. Undefined when they made nothing (the statement is then insertDecidingSql's alone).
   */
  made(): { sql: string; params: unknown[] } | undefined;
  /** What an event the statement stored decided made, given the seq it stored it with (none if it made nothing). */
  madeBy(eventId: string, seq: number): Made[];
}

/** A new event as the commit that stores it knows it, before it has a seq. */
export interface FreshEvent {
  event_id: string;
  type: string;
  resource_key: string | null;
  payload: string;
  depth: number;
  envelope?: EventEnvelope;
}

/**
 * An event decided in the commit that stores it: stored finished, with its outcome's columns (as the commit of an
 * evaluated event sets them, processing/event-commit.ts), then `record` in the same transaction (its executions and
 * their first runs, its resource's snapshot) once it has its seq: what it made goes to `take` after the commit. Never
 * for a duplicate: that stores nothing.
 */
export interface DecidedEvent<Made = never> {
  status: string;
  depth: number;
  selfCaused: boolean;
  /** The explanation, as JSON. */
  explanation: string;
  /** The resource's snapshot as `record` saves it, when the event made nothing else (PostgreSQL writes it in the statement that stores the batch). */
  snapshot?: string | undefined;
  /** SQLite: writes what it made once it has its seq. Never asked on PostgreSQL, whose statement writes that (AssumingDecider.made). */
  record(sql: Statements, seq: number): Promise<Made[]>;
}

/**
 * The lease of a commit's new events, in its INSERT (on SQLite, asked just
 * before each event's INSERT): `sql` is a SELECT over `batch` (the events
 * about to be stored, one row each: `ord` their order in
 * the commit, `resource_key`, `scope_kind`, `scope_parent`, `seen` as it will
 * be stored, `received_at`) of those to lease, and whether each is `held`
 * behind a create in flight (LeasedEvent.held), with `params` for its
 * placeholders; a leased event is leased to `owner` until `until`. On PostgreSQL it is
 * the definitions of `held`, `free` and `leased` for the INSERT's WITH instead
 * (insertDecidingSql). Its text is the same for every commit (a prepared
 * statement). On PostgreSQL it leases `room` at most itself; on SQLite, where
 * the INSERT runs once per event, the writer stops leasing once `room` are
 * leased.
 */
export interface FreshLease {
  sql: string;
  params: unknown[];
  room: number;
  owner: string;
  until: string;
}

/** A new event its commit leased to the event loop: the columns a claim returns (processing/work.ts ClaimedEvent). */
export interface LeasedEvent {
  seq: number;
  event_id: string;
  type: string;
  resource_key: string | null;
  payload: string;
  depth: number;
  attempts: number;
  /** Intake's parse of `payload`, while the event is in memory from its commit on (NewEvent.envelope). */
  envelope?: EventEnvelope;
  /** Leased while a create in its scope was in flight: evaluated once none is (work-queue.ts FRESH_LEASE_SQLITE, FRESH_LEASE_POSTGRES). */
  held?: HeldBehind;
}

/** What a new resource held behind the creates in flight waits on: its scope, and when it was received. */
export interface HeldBehind {
  scope: CausalScope;
  receivedAt: string;
}

/** What a commit leased to the event loop; `complete`: nothing it could have leased was left for want of room. */
export interface HandedOver<T> {
  events: T[];
  complete: boolean;
}

/** Keeps a batch's statement and its memory small. */
const MAX_BATCH = 500;

@Injectable()
export class EventWriter {
  private readonly listeners: Array<() => void> = [];
  private readonly batches: GroupCommit<NewEvent, WriteOutcome>;
  private handOff: FreshEventsHandOff<unknown> | undefined;
  /** What the batch being committed leased and decided (one batch at a time: GroupCommit flushes in turn). */
  private leased: Stored | undefined;
  /** The statements that store and lease, by the lease's text, then by what the decider writes with it (a few per database kind). */
  private readonly leasingTexts = new Map<string, Map<string, string>>();

  constructor(
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.batches = new GroupCommit(
      db,
      (manager, events) => this.insert(statementsOf(manager), events),
      // SQLite syncs intake's commit on the event loop: webhooks read meanwhile would wait for a commit of their own.
      { durable: true, maxBatch: MAX_BATCH, holdWhileArriving: db.kind === 'sqlite', moreOnTheirWay: requestsOnTheirWay },
      () => this.committed(),
    );
  }

  /** Called after every commit that stored at least one new event (wakes the workers). */
  onCommitted(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Leases new events to the event loop in the commit that stores them (at most one hand-off). */
  handOffTo<Made>(handOff: FreshEventsHandOff<Made>): void {
    this.handOff = handOff as FreshEventsHandOff<unknown>;
  }

  /** Resolves once every event written so far is committed or refused. */
  settled(): Promise<void> {
    return this.batches.settled();
  }

  /** Resolves once the event is committed (or known already); rejects with the batch's error, nothing stored. */
  write(event: NewEvent): Promise<WriteOutcome> {
    return this.batches.submit(event);
  }

  /**
   * On PostgreSQL the batch's one INSERT is its transaction's last statement: sent with the COMMIT (queueRows), its
   * rows are read once both are answered, one round trip a commit instead of two.
   */
  private async insert(sql: Statements, events: NewEvent[]): Promise<WriteOutcome[] | Answered<WriteOutcome>> {
    this.leased = undefined;
    const receivedAt = nowIso(this.clock);
    const lease = this.handOff?.lease();
    if (this.db.kind === 'postgres') {
      // Found by key alone (the snapshots by resource key, the conflicts by event id, the lease's checks): planned once
      // per session (0.08 ms of planning a commit before). The lock's statement too (0.03 ms of planning a commit).
      planOnceByKey(sql);
      lockResources(sql, events.map((e) => e.resourceKey));
      const decisions = lease !== undefined ? await this.decisionsOf(sql, events, receivedAt) : undefined;
      const answered = this.insertMany(sql, events, receivedAt, lease, decisions)
        .then((rows) => this.stored(events, decisions ? decidedRows(rows, events, decisions.decider) : rows, lease, receivedAt));
      answered.catch(() => undefined); // The commit fails with the INSERT's error, and GroupCommit tells the callers.
      return { answered };
    }
    return this.stored(events, await this.insertEach(sql, events, receivedAt, lease), lease, receivedAt);
  }

  /** What each event of the batch was, from the rows its statements stored; what it leased, for `committed`. */
  private stored(events: NewEvent[], rows: Inserted[], lease: FreshLease | undefined, receivedAt: string): WriteOutcome[] {
    if (rows.length > 0) this.leased = leasedOf(events, rows, lease, receivedAt);
    const inserted = new Set(rows.map((r) => r.event_id));
    // The first of two events with one id in a batch is the new one; the second is its duplicate.
    return events.map((event) => (inserted.delete(event.eventId) ? 'accepted' : 'duplicate'));
  }

  private leasingText(lease: FreshLease, made: string, make: (lease: string, made: string) => string): string {
    let texts = this.leasingTexts.get(lease.sql);
    if (texts === undefined) this.leasingTexts.set(lease.sql, (texts = new Map()));
    let text = texts.get(made);
    if (text === undefined) texts.set(made, (text = make(lease.sql, made)));
    return text;
  }

  /**
   * PostgreSQL: what the decider makes of each new event, asked before the statement that stores the batch (it reads
   * nothing: AssumingDecider.readSnapshot). Only an event alone in the batch with its id and its resource is asked: the
   * statement sees none of its own rows, so a later event about the same resource could not compare itself with a
   * snapshot the first saves there. Undefined: no decider, or it declined the batch.
   */
  private async decisionsOf(sql: Statements, events: NewEvent[], now: string): Promise<Decisions | undefined> {
    const fresh = events.map(freshEvent);
    const decider = await this.handOff?.decider?.(sql, fresh, now);
    if (decider === undefined || !('stale' in decider)) return undefined;
    const alone = aloneInBatch(events);
    const decided: Array<DecidedEvent<unknown> | undefined> = [];
    for (const [i, e] of events.entries()) decided.push(alone(e) ? await decider.decide(fresh[i]!) : undefined);
    return { decider, decided };
  }

  private insertMany(sql: Statements, events: NewEvent[], now: string, lease: FreshLease | undefined, decisions?: Decisions): Promise<Inserted[]> {
    const column = <T>(pick: (e: NewEvent) => T) => events.map(pick);
    const params = [
      now, now, column((e) => e.eventId), column((e) => e.type), column((e) => e.resourceKey),
      column((e) => e.scope?.kind ?? null), column((e) => e.scope?.parent ?? null), column((e) => e.source),
      column((e) => e.payload), column((e) => e.depth ?? 0), column((e) => e.replayOf ?? null),
    ];
    if (lease === undefined) return sql.queueRows<Inserted>(INSERT_MANY, params);
    const made = decisions?.decider.made();
    const text = this.leasingText(lease, made?.sql ?? '', insertDecidingSql);
    return sql.queueRows<Inserted>(text, [...params, ...decidedColumns(events, decisions), ...lease.params, ...(made?.params ?? [])]);
  }

  /** SQLite: event by event, leased while there is room (each sees the ones before it, leased or not). */
  private async insertEach(sql: Statements, events: NewEvent[], now: string, lease: FreshLease | undefined): Promise<Inserted[]> {
    const inserted: Inserted[] = [];
    let room = lease?.room ?? 0;
    const fresh = lease !== undefined && this.handOff?.decider ? events.map(freshEvent) : [];
    const asked = fresh.length > 0 ? await this.handOff?.decider?.(sql, fresh, now) : undefined;
    const decider = asked !== undefined && 'seen' in asked ? asked : undefined;
    for (const [i, e] of events.entries()) {
      const scopeKind = e.scope?.kind ?? null;
      const scopeParent = e.scope?.parent ?? null;
      const seen = e.resourceKey === null || (decider ? decider.seen(e.resourceKey) : (await sql.rows(HAS_SNAPSHOT, [e.resourceKey])).length > 0);
      // Without room for more, the lease is still asked of an event the decider may decide (a decided one takes none).
      const [free] = lease !== undefined && (room > 0 || decider !== undefined)
        ? await sql.rows<LeaseRow>(this.leasingText(lease, '', leasedOne), [e.resourceKey, scopeKind, scopeParent, now, seen ? 1 : 0, ...lease.params])
        : [];
      const decided = free && !free.held ? await decider?.decide(fresh[i]) : undefined;
      if (decided) {
        const seq = await sql.insertOne(INSERT_DECIDED, [
          e.eventId, e.type, e.resourceKey, scopeKind, scopeParent, decided.status, e.source, e.payload, decided.depth, e.replayOf ?? null,
          now, now, seen ? 1 : 0, decided.selfCaused ? 1 : 0, now, decided.explanation,
        ]);
        if (seq === undefined) continue; // a duplicate: its decision is not stored
        const made = await decided.record(sql, seq);
        inserted.push({ seq, event_id: e.eventId, leased: false, decided: fresh[i], made });
        continue;
      }
      const leased = room > 0 ? free : undefined;
      const seq = await sql.insertOne(INSERT_ONE, [
        e.eventId, e.type, e.resourceKey, scopeKind, scopeParent, e.source, e.payload, e.depth ?? 0, e.replayOf ?? null, now, now,
        seen ? 1 : 0, leased ? lease?.owner : null, leased ? lease?.until : null,
      ]);
      if (seq === undefined) continue; // a duplicate
      if (leased) room--;
      inserted.push({ seq, event_id: e.eventId, leased: leased !== undefined, held: Boolean(leased?.held) });
    }
    return inserted;
  }

  /** After a commit that stored new events: what it leased to the event loop, then the listeners. */
  private committed(): void {
    const leased = this.leased;
    this.leased = undefined;
    if (leased === undefined) return;
    this.handOff?.take(leased.events, leased.complete, leased.decided, leased.made);
    for (const listener of this.listeners) listener();
  }
}

/** A row of leasedOne: the event is leased (FreshLease.owner, until), and whether it is held behind a create in flight (SQLite answers 0 or 1). */
interface LeaseRow {
  held: number;
}

interface Inserted {
  seq: number | string;
  event_id: string;
  /** SQLite answers 0 or 1. */
  leased: boolean | number;
  /** Leased, held behind a create in flight. */
  held?: boolean;
  /** Stored decided (FreshEventsHandOff.decider), not leased: the event as decided, and what it made. */
  decided?: FreshEvent;
  made?: unknown[];
  /** PostgreSQL (insertDecidingSql): stored decided; whether its resource had a snapshot, and no provenance (what the evaluation assumed: AssumingDecider.readSnapshot). */
  finished?: boolean;
  seen_resource?: boolean;
  untouched?: boolean;
}

/** PostgreSQL: what the decider made of a batch's events (Decider.decide, in the batch's order), before the statement that stores them. */
interface Decisions {
  decider: AssumingDecider<unknown>;
  decided: Array<DecidedEvent<unknown> | undefined>;
}

/** Whether an event is alone in its batch with its id and its resource (EventWriter.decisionsOf). */
function aloneInBatch(events: NewEvent[]): (e: NewEvent) => boolean {
  const count = new Map<string, number>();
  const add = (key: string) => count.set(key, (count.get(key) ?? 0) + 1);
  for (const e of events) {
    add(`id\u0000${e.eventId}`);
    if (e.resourceKey !== null) add(`resource\u0000${e.resourceKey}`);
  }
  return (e) => count.get(`id\u0000${e.eventId}`) === 1 && (e.resourceKey === null || count.get(`resource\u0000${e.resourceKey}`) === 1);
}

/** insertDecidingSql's columns of decisions: status, depth, self-caused, explanation, snapshot; then whether its evaluation read the snapshot (AssumingDecider.readSnapshot). */
function decidedColumns(events: NewEvent[], decisions: Decisions | undefined): unknown[][] {
  const decided = (pick: (d: DecidedEvent<unknown>) => unknown) => events.map((_e, i) => {
    const d = decisions?.decided[i];
    return d === undefined ? null : (pick(d) ?? null);
  });
  const reader = decisions?.decider;
  return [
    decided((d) => d.status), decided((d) => d.depth), decided((d) => d.selfCaused), decided((d) => d.explanation), decided((d) => d.snapshot),
    events.map((e) => (e.resourceKey === null || reader === undefined ? null : reader.readSnapshot(e.resourceKey))),
  ];
}

/** Whether what the decider's evaluation of an event assumed of its resource is so (insertDecidingSql's `current`, for a row it stored). */
function assumed(row: Inserted, e: NewEvent | undefined, decider: AssumingDecider<unknown>): boolean {
  const key = e?.resourceKey ?? null;
  return Boolean(row.untouched) && (key === null || !row.seen_resource || !decider.readSnapshot(key));
}

/**
 * PostgreSQL: the rows insertDecidingSql stored, as `stored` reads SQLite's: each stored decided with the event as
 * decided and what it made (AssumingDecider.madeBy); an evaluation the decider made of an event leased on another
 * reading forgotten (AssumingDecider.stale).
 */
function decidedRows(rows: Inserted[], events: NewEvent[], decider: AssumingDecider<unknown>): Inserted[] {
  const byId = new Map(events.map((e) => [e.eventId, e]));
  for (const row of rows) {
    const e = byId.get(row.event_id);
    if (row.finished && e !== undefined) {
      row.decided = freshEvent(e);
      row.made = decider.madeBy(row.event_id, Number(row.seq));
    } else if (row.leased && !assumed(row, e, decider)) decider.stale(row.event_id);
  }
  return rows;
}

/** What a commit leased to the event loop, what it decided, and what those made. */
interface Stored extends HandedOver<LeasedEvent> {
  decided: FreshEvent[];
  made: unknown[];
}

function freshEvent(e: NewEvent): FreshEvent {
  const event: FreshEvent = { event_id: e.eventId, type: e.type, resource_key: e.resourceKey, payload: e.payload, depth: e.depth ?? 0 };
  if (e.envelope) event.envelope = e.envelope;
  return event;
}

/**
 * The events a commit leased, as a claim returns them, oldest first. Complete when the lease had room for every new
 * event and none of the batch was a duplicate: a duplicate may have taken a place in the lease, or stood first for
 * its resource in the batch, so that a later event was left unleased with nothing to let it go.
 */
function leasedOf(events: NewEvent[], rows: Inserted[], lease: FreshLease | undefined, receivedAt: string): Stored {
  if (lease === undefined) return { events: [], complete: false, decided: [], made: [] };
  const byId = new Map(events.map((e) => [e.eventId, e]));
  const leased: LeasedEvent[] = [];
  const decided: FreshEvent[] = [];
  const made: unknown[] = [];
  for (const row of rows) {
    const e = byId.get(row.event_id);
    if (row.decided) decided.push(row.decided);
    if (row.made) made.push(...row.made);
    if (!row.leased || e === undefined) continue;
    const event: LeasedEvent = { seq: Number(row.seq), event_id: e.eventId, type: e.type, resource_key: e.resourceKey, payload: e.payload, depth: e.depth ?? 0, attempts: 0 };
    if (e.envelope) event.envelope = e.envelope;
    if (row.held && e.scope) event.held = { scope: e.scope, receivedAt };
    leased.push(event);
  }
  leased.sort((a, b) => a.seq - b.seq);
  // The decided took no room: only the others could have been left unleased for want of it.
  const roomNeeded = rows.length - decided.length;
  return { events: leased, complete: roomNeeded <= lease.room && rows.length === events.length, decided, made };
}
