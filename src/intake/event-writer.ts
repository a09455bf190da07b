/**
 * Group commit for accepted events (database/group-commit.ts). Each caller's
 * event joins the batch being formed; one transaction of INSERT … ON CONFLICT
 * DO NOTHING RETURNING commits the whole batch, and only then is each caller
 * told whether its event was new or a duplicate.
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
 */
import { Inject, Injectable } from '@nestjs/common';
import type { CausalScope } from '../causal-scope.js';
import { CLOCK, type Clock } from '../clock.js';
import type { DatabaseKind } from '../database/data-source.js';
import { Database } from '../database/database.service.js';
import type { EventSource } from '../database/event.entity.js';
import { GroupCommit } from '../database/group-commit.js';
import { planOnceByKey } from '../database/planned-once.js';
import { statementsOf, type Statements } from '../database/statements.js';

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
}

export type WriteOutcome = 'accepted' | 'duplicate';

/**
 * How the commit that stores new events hands them to this process's event
 * loop (processing/workers.ts): `lease` runs inside that commit and leases the
 * events the loop may evaluate at once; `take` gets them once the commit is
 * done. `complete`: the loop had room for every new event, so those not leased
 * wait for something else (an earlier event about their resource, a create in
 * flight) that will let them go, and no claim could take them now.
 */
export interface FreshEventsHandOff<T> {
  lease(sql: Statements, fresh: FreshEvents): Promise<HandedOver<T>>;
  take(leased: T[], complete: boolean): void;
}

/**
 * The events a commit is storing, for the hand-off's lease. It is asked for
 * right after the INSERT is sent: on PostgreSQL the lease finds the new rows
 * by their ids and goes out behind the INSERT without waiting for its answer
 * (one round trip less, each a turn of a busy event loop); SQLite's, in
 * process, waits for `inserted` and leases by seq.
 */
export interface FreshEvents {
  eventIds: string[];
  /** When they were received: the `received_at` of every new row of this commit. */
  receivedAt: string;
  /** The seqs the INSERT gave the new events (duplicates have none). */
  inserted: Promise<number[]>;
}

/** What a commit leased to the event loop; `complete`: nothing it could have leased was left for want of room. */
export interface HandedOver<T> {
  events: T[];
  complete: boolean;
}

const COLUMNS = 'event_id, type, resource_key, scope_kind, scope_parent, status, source, payload, depth, replay_of, received_at, attempts, next_attempt_at, seen_resource';
// `seen_resource` (no resource, or one with a snapshot) spares the claim a scan: see the migration that adds it.
/** SQLite: one prepared statement, run once per event of the batch (in process, no round trips). */
const INSERT_ONE = `INSERT INTO events (${COLUMNS}) VALUES (?, ?, ?, ?, ?, 'received', ?, ?, ?, ?, ?, 0, ?,
    ? IS NULL OR EXISTS (SELECT 1 FROM resource_snapshots s WHERE s.resource_key = ?))
  ON CONFLICT (event_id) DO NOTHING RETURNING seq, event_id`;
/**
 * PostgreSQL: the whole batch in one statement, whatever its size (columns as
 * arrays). The snapshot is probed once per event through its primary key
 * (LATERAL … LIMIT 1): as an EXISTS, a large batch on a table with young
 * statistics was planned as a hashed subplan that read every snapshot.
 */
export const INSERT_MANY = `INSERT INTO events (${COLUMNS})
  SELECT id, type, t.resource_key, scope_kind, scope_parent, 'received', source, payload, depth, replay_of, ?, 0, ?,
         t.resource_key IS NULL OR s.seen IS NOT NULL
  FROM unnest(?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::text[], ?::int[], ?::varchar[])
       AS t(id, type, resource_key, scope_kind, scope_parent, source, payload, depth, replay_of)
  LEFT JOIN LATERAL (SELECT true AS seen FROM resource_snapshots s WHERE s.resource_key = t.resource_key LIMIT 1) s ON true
  ON CONFLICT (event_id) DO NOTHING RETURNING seq, event_id`;
/** Keeps a batch's statement and its memory small. */
const MAX_BATCH = 500;

@Injectable()
export class EventWriter {
  private readonly listeners: Array<() => void> = [];
  private readonly batches: GroupCommit<NewEvent, WriteOutcome>;
  private handOff: FreshEventsHandOff<unknown> | undefined;
  /** What the batch being committed leased (one batch at a time: GroupCommit flushes in turn). */
  private leased: HandedOver<unknown> | undefined;

  constructor(
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.batches = new GroupCommit(
      db,
      (manager, events) => this.insert(statementsOf(manager), events),
      { durable: true, maxBatch: MAX_BATCH },
      () => this.committed(),
    );
  }

  /** Called after every commit that stored at least one new event (wakes the workers). */
  onCommitted(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Leases new events to the event loop in the commit that stores them (at most one hand-off). */
  handOffTo<T>(handOff: FreshEventsHandOff<T>): void {
    this.handOff = handOff as FreshEventsHandOff<unknown>;
  }

  /** Resolves once the event is committed (or known already); rejects with the batch's error, nothing stored. */
  write(event: NewEvent): Promise<WriteOutcome> {
    return this.batches.submit(event);
  }

  private async insert(sql: Statements, events: NewEvent[]): Promise<WriteOutcome[]> {
    this.leased = undefined;
    const receivedAt = this.clock.now().toISOString();
    const inserting = insertedRows(sql, this.db.kind, events, receivedAt);
    const seqs = () => inserting.then((rows) => rows.map((r) => Number(r.seq)));
    const leasing = this.handOff?.lease(sql, { eventIds: events.map((e) => e.eventId), receivedAt, inserted: seqs() });
    const [rows, leased] = await Promise.all([inserting, leasing]);
    if (rows.length > 0) this.leased = leased ?? { events: [], complete: false };
    const inserted = new Set(rows.map((r) => r.event_id));
    // The first of two events with one id in a batch is the new one; the second is its duplicate.
    return events.map((event) => (inserted.delete(event.eventId) ? 'accepted' : 'duplicate'));
  }

  /** After a commit that stored new events: what it leased to the event loop, then the listeners. */
  private committed(): void {
    const leased = this.leased;
    this.leased = undefined;
    if (leased === undefined) return;
    this.handOff?.take(leased.events, leased.complete);
    for (const listener of this.listeners) listener();
  }
}

interface Inserted {
  seq: number | string;
  event_id: string;
}

async function insertedRows(sql: Statements, kind: DatabaseKind, events: NewEvent[], now: string): Promise<Inserted[]> {
  if (kind === 'postgres') {
    const column = <T>(pick: (e: NewEvent) => T) => events.map(pick);
    // Found by key alone (the snapshots by resource key, the conflicts by event id): planned once per session (0.08 ms
    // of planning a commit before), and so is the lease of fresh events that follows it in this commit.
    planOnceByKey(sql);
    return sql.rows<Inserted>(INSERT_MANY, [
      now, now, column((e) => e.eventId), column((e) => e.type), column((e) => e.resourceKey),
      column((e) => e.scope?.kind ?? null), column((e) => e.scope?.parent ?? null), column((e) => e.source),
      column((e) => e.payload), column((e) => e.depth ?? 0), column((e) => e.replayOf ?? null),
    ]);
  }
  const inserted: Inserted[] = [];
  for (const e of events) {
    const rows = await sql.rows<Inserted>(INSERT_ONE, [e.eventId, e.type, e.resourceKey, e.scope?.kind ?? null, e.scope?.parent ?? null, e.source, e.payload, e.depth ?? 0, e.replayOf ?? null, now, now, e.resourceKey, e.resourceKey]);
    inserted.push(...rows);
  }
  return inserted;
}
