/**
 * Claiming work from the database, the same way on SQLite and PostgreSQL.
 *
 * Work is a row (an event to evaluate, an action run to perform) that a worker
 * takes by writing a lease on it in one UPDATE … WHERE id IN (SELECT … LIMIT n)
 * … RETURNING statement. On PostgreSQL the inner SELECT adds FOR UPDATE SKIP
 * LOCKED, so replicas sharing the database never take the same row and never
 * wait on each other; SQLite has one writer, which makes the statement atomic by
 * itself. A lease expires: work held by a process that died is taken again by
 * whoever claims next, and because the work's results are committed together
 * with the status change that ends it (guarded by the lease owner), it is done
 * once.
 *
 * Per-resource order: an event is claimable only when no earlier event about the
 * same resource is still waiting and no earlier event's action runs on it are
 * unfinished.
 *
 * Causal barrier: an event about a resource the engine has not seen before
 * (`seen_resource` false: no snapshot of it) is not claimed while an action
 * that could have created that resource, started before the event arrived, is
 * still in flight. The service can send the webhook about a resource an action
 * created before the engine has recorded the action's answer, and so the
 * resource's provenance; waiting for those runs (at most SERVICE_TIMEOUT_MS)
 * lets loop protection see the resources the engine made. The wait is scoped
 * (causal-scope.ts): a run records what its creating request could create
 * (kind and parent: a task in project A) before it is sent, and an event waits
 * only for runs in its own scope, so a slow create in project A holds back no
 * event about project B. (Actions that change an existing resource record it
 * before they send, so they need no barrier.) A run is in flight while it is
 * `running` under a live lease: a run whose attempt timed out (it may retry for
 * minutes) or whose holder is gone is not waited for. Its resource is then seen
 * as an outside one, which costs at most one extra link per such attempt
 * (README, Guarantees).
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, isoIn, nowIso, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { queryRows, unindexed, waitingEvent } from '../database/sql.js';
import type { DatabaseKind } from '../database/data-source.js';
import { planEachTime, planOnceByKey, plannedOnce } from '../database/planned-once.js';
import { statementsOf, type Statements } from '../database/statements.js';
import type { FreshLease, HeldBehind } from '../intake/event-writer.js';
import { refreshStaleStatistics } from './statistics.js';
import { CREATING_IN_FLIGHT, oldestCreatingInFlight, UNFINISHED_RUN } from './runs-in-flight.js';
import { unseenScopedSql } from './unseen-claim.js';
import type { ClaimedActionRun, ClaimedEvent, HandOff } from './work.js';

/** Evaluating an event takes milliseconds, lookups included; a dead holder's events wait this long. */
export const EVENT_LEASE_MS = 15_000;
const SLOW_CLAIM_MS = 20;
/**
 * Whether an event claim asks for fresh statistics (PostgreSQL; at most every ANALYZE_EVERY_MS, of the tables that
 * outgrew theirs: statistics.ts): it took all it asked for (a backlog: the tables are growing), or it was slow while
 * planned for its values on the statistics there are. A slow claim planned once by key (planned-once.ts: after a claim
 * that found nothing) says nothing of the statistics: its plan walks indexes by key whatever they say, and on this
 * shared machine a claim waits 20 ms for a core often enough. Counted as slow too, such claims had the engine analyze
 * five tables every five seconds while its tables grew from nothing: 0.6–5.2 s of the server's time in a minute's run
 * side by side, against 0.15 s for the claims themselves (ANALYZE reads 30,000 rows of each table; session 74).
 */
export function claimWantsStatistics({ plannedOnce, ms, taken, limit }: { plannedOnce: boolean; ms: number; taken: number; limit: number }): boolean {
  return taken === limit || (!plannedOnce && ms >= SLOW_CLAIM_MS);
}
/** At most this often: a table that grows by thousands of rows a second outgrows its statistics in seconds. */
const ANALYZE_EVERY_MS = 5_000;
/** How often an action claim also looks for running runs whose lease has run out (see `recovering`). */
const LEASE_RECOVERY_MS = 1_000;


/**
 * The first event received after the oldest creating run in flight: events
 * before it cannot have been caused by any of them. Computed once per claim
 * (uncorrelated), and as a seq bound, so the claim's index scans split there.
 */
const barrierSeq = (kind: DatabaseKind) => `COALESCE(
  (SELECT x.seq FROM events x
   WHERE x.received_at >= ${oldestCreatingInFlight(kind)}
   ORDER BY x.received_at, x.seq LIMIT 1),
  2147483647)`;

/**
 * When the oldest creating run in flight under a live lease (`?`: now) that could have caused an event of scope
 * (`kind`, `parent`) was created. A MIN written as the first row in created_at order: as MIN(a.created_at),
 * PostgreSQL planned on young statistics read every creating run in flight of the event's kind for every new event
 * (50–90 under load) instead of the oldest.
 */
const heldFrom = (kind: string, parent: string) => `(SELECT a.created_at FROM action_runs a
  WHERE ${CREATING_IN_FLIGHT} AND a.scope_kind = ${kind}
    AND (a.scope_parent IS NULL OR ${parent} IS NULL OR a.scope_parent = ${parent}) AND a.lease_until > ?
  ORDER BY a.created_at LIMIT 1)`;

/**
 * SQLite: the limit of a claim is written into its statement (`limit`), not bound. SQLite reads a bound LIMIT's value
 * when it plans a statement, and prepares the statement again whenever a value is bound there, so every claim was
 * planned afresh (the event claim: about 680 µs with its limits bound, 250 µs with them written in). Statements are
 * kept per limit, and the limits the loops ask for are few. PostgreSQL binds them (`?`).
 */
function limitSql(kind: DatabaseKind, limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`a claim's limit must be a whole number, got ${limit}`);
  return kind === 'postgres' ? '?' : String(limit);
}

/** A claim's statement for `key` (its limit, and which variant), made once. */
function textFor<K>(texts: Map<K, string>, key: K, make: () => string): string {
  let text = texts.get(key);
  if (text === undefined) texts.set(key, (text = make()));
  return text;
}

/** The columns of a claimed action run (ClaimedActionRun). */
const CLAIMED_RUN = 'id, execution_id, event_seq, resource_key, rule_id, position, action_id, type, attempts, request, item_index, item';

const claimRunsSqlite = (limit: string, recover: boolean) => `
  UPDATE action_runs
  SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
  WHERE id IN (
    SELECT id FROM action_runs
    WHERE status IN ('pending', 'retrying'${recover ? ", 'running'" : ''}) AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
    ORDER BY next_attempt_at LIMIT ${limit})
  RETURNING ${CLAIMED_RUN}`;

/**
 * What makes waiting event `e` claimable besides the causal barrier (placeholders: now, now): due, not leased,
 * and first in its resource's order (no earlier event about it waiting, no earlier event's run on it unfinished).
 */
function claimFilters(kind: DatabaseKind): string {
  // PostgreSQL: OFFSET 0 keeps each NOT EXISTS a probe of its index per candidate; as an anti join, planned on
  // young statistics, it read every waiting event or unfinished run (hashed, merged or materialised) per claim.
  const fence = kind === 'postgres' ? ' OFFSET 0' : '';
  return `e.next_attempt_at <= ? AND (e.lease_until IS NULL OR e.lease_until < ?)
        AND NOT EXISTS (SELECT 1 FROM events p
                        WHERE p.resource_key = e.resource_key AND ${waitingEvent(kind, 'p.')} AND p.seq < e.seq${fence})
        AND NOT EXISTS (SELECT 1 FROM action_runs a
                        WHERE a.resource_key = e.resource_key AND a.event_seq < e.seq AND ${UNFINISHED_RUN}${fence})`;
}

/**
 * SQLite: whether a claim could find anything (placeholders: now, now): a waiting event that is due and not
 * leased, or whose lease ran out. Both through partial indexes that hold only such events (idx_events_unleased)
 * or only the leased ones (idx_events_leased, the batches in hand), so it costs the same whatever the history.
 * (PostgreSQL plans from statistics, and on those of a table that grew in seconds it read the table for this;
 * there the claim, written to hold up on young statistics, is its own probe.)
 */
const ANY_CLAIMABLE_SQLITE = `SELECT
  EXISTS (SELECT 1 FROM events INDEXED BY idx_events_unleased WHERE status = 'received' AND lease_owner IS NULL AND next_attempt_at <= ?)
  OR EXISTS (SELECT 1 FROM events INDEXED BY idx_events_leased WHERE lease_owner IS NOT NULL AND status = 'received' AND lease_until < ?) AS due`;

/**
 * What keeps a new event waiting behind the ones before it, for intake's lease of `batch` (event-writer.ts
 * FreshLease): an event about its resource still waiting, or a run of an earlier event about it unfinished. (A new
 * event is due and unleased, and every stored event came before it.)
 */
function behindEarlier(kind: DatabaseKind): string {
  const fence = kind === 'postgres' ? ' OFFSET 0' : '';
  return `NOT EXISTS (SELECT 1 FROM events p WHERE p.resource_key = b.resource_key AND ${waitingEvent(kind, 'p.')}${fence})
      AND NOT EXISTS (SELECT 1 FROM action_runs a WHERE a.resource_key = b.resource_key AND ${UNFINISHED_RUN}${fence})`;
}

/**
 * The creating runs in flight that hold back a new resource in scope (`kind`, `parent`) received at `at`: as the
 * claim's barrier says (unseen-claim.ts), created no later than the event was received, under a lease alive at
 * `until`.
 */
const holdingRun = (kind: string, parent: string, at: string, until: string) => `SELECT 1 FROM action_runs a
      WHERE ${CREATING_IN_FLIGHT} AND a.scope_kind = ${kind}
        AND (a.scope_parent IS NULL OR ${parent} IS NULL OR a.scope_parent = ${parent})
        AND a.lease_until > ${until} AND a.created_at <= ${at}`;

/**
 * Which of a commit's new events intake's INSERT leases to this process (event-writer.ts FreshLease): the conditions
 * of the claim but the causal barrier. SQLite stores one event at a time, each statement seeing the ones before it
 * (no placeholders of its own: a row says the event is leased, and whether it is held; the writer stores it leased
 * to the FreshLease's owner until its end); the runs' leases are compared with the time the event is received,
 * which is now.
 *
 * A new resource behind a create in flight in its scope is leased too, `held`, and the event loop keeps it aside until
 * no create in flight holds it back (parked-events.ts, `goneOn`: the same condition, asked of the database) instead of
 * leaving it for a claim. On SQLite the engine is one process (releaseStaleLeases takes back every lease at start), so
 * the creates it waits for are its own, and the commits that record their outcomes let it go at once. Under load
 * nearly every new task of a project waits behind an earlier event's create in it: as a claim, each cost an UPDATE of
 * its row and a share of a claim's walk.
 */
const FRESH_LEASE_SQLITE = `SELECT NOT b.seen AND EXISTS (${holdingRun('b.scope_kind', 'b.scope_parent', 'b.received_at', 'b.received_at')}) AS held
  FROM batch b
  WHERE ${behindEarlier('sqlite')}`;

/**
 * When the oldest creating run still in flight in scope (kind, parent, parent; `?`: now) was created, `heldFrom`
 * (null: none); the events held behind it that were received before go on (parked-events.ts).
 */
const HELD_SINCE = `SELECT ${heldFrom('?', 'CAST(? AS varchar)')} AS since`;

/**
 * PostgreSQL stores the whole batch in one statement, which sees none of its own rows: of several new events about
 * one resource only the first may be leased (`nth`). Held behind a create in flight or not, as on SQLite: there the
 * creates may be another replica's, and the event loop asks the database whether they have ended (`goneOn`) in the
 * commits of its own outcomes and, for the others', every POLL_MS. Three definitions of the INSERT's WITH (event-insert-sql.ts
 * insertDecidingSql, whose batch says what the decider decided in `decision`, and whether what it assumed holds in
 * `current`): `held`, the oldest creating run in flight (`heldFrom`) for each scope of the new unseen events, looked
 * up once per scope, not once per event (a commit's events are mostly of a few scopes, and each lookup walks
 * idx_action_runs_creating_in_flight past the entries of creates ended too recently to be marked dead, 11 a lookup
 * under load; as a NOT EXISTS, on the young statistics of a table that grew in seconds, it read the whole table for
 * every new event), which the INSERT's RETURNING reads to say which it leased are held; `free`, the events free to be
 * evaluated now, each `decided` where it is decided, not held behind a create in flight and read as it is now; and
 * `leased`, the others of them, `room` at most (a decided event takes no room). Placeholders: now (the runs' leases),
 * owner, lease until, room.
 */
const FRESH_LEASE_POSTGRES = `
  held AS MATERIALIZED (
    SELECT s.kind, s.parent, ${heldFrom('s.kind', 's.parent')} AS since
    FROM (SELECT DISTINCT scope_kind AS kind, scope_parent AS parent FROM batch WHERE scope_kind IS NOT NULL AND NOT seen) s),
  free AS MATERIALIZED (
    SELECT b.ord, b.decision IS NOT NULL AND b.current AND (b.seen OR b.received_at < COALESCE(
             (SELECT h.since FROM held h WHERE h.kind = b.scope_kind AND h.parent IS NOT DISTINCT FROM b.scope_parent), '9999')) AS decided
    FROM (SELECT b.*, row_number() OVER (PARTITION BY b.resource_key ORDER BY b.ord) AS nth FROM batch b) b
    WHERE (b.resource_key IS NULL OR b.nth = 1) AND ${behindEarlier('postgres')}),
  leased AS MATERIALIZED (
    SELECT f.ord, ?::varchar AS lease_owner, ?::varchar AS lease_until FROM free f WHERE NOT f.decided ORDER BY f.ord LIMIT ?)`;

export const freshLeaseSql = (kind: DatabaseKind): string => (kind === 'postgres' ? FRESH_LEASE_POSTGRES : FRESH_LEASE_SQLITE);

/** PostgreSQL: rows another claimer holds are passed over, never waited for. */
function skipLocked(kind: DatabaseKind): string {
  return kind === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '';
}

/**
 * PostgreSQL: whether an event about one of the resources (`?::text[]`) waits due and not leased (or under a lease
 * run out; placeholders: now, now, now): what the runs an outcome commit ended may have let go (workers.ts). Through
 * idx_events_waiting_resource, by key.
 */
const WAITING_ABOUT = `SELECT EXISTS (SELECT 1 FROM events w WHERE w.resource_key = ANY(?::text[]) AND ${waitingEvent('postgres', 'w.')}
  AND w.next_attempt_at <= ? AND (w.lease_owner IS NULL OR w.lease_until < ?)) AS waiting`;

/**
 * `IN (candidates)`; on PostgreSQL `= ANY(ARRAY(candidates))`, computed once
 * and probed through the primary key, so the rows are never found by walking
 * the primary key from its start to the last candidate (a merge join, which
 * young statistics make look cheap, does).
 */
function inCandidates(kind: DatabaseKind, candidates: string): string {
  return kind === 'postgres' ? `= ANY(ARRAY(${candidates}))` : `IN (${candidates})`;
}

/**
 * PostgreSQL: the status of a row the claim has found by key, checked again as `unindexed` (sql.ts), so that the
 * rows are fetched by their keys alone. Planned from a plain `status = …` on young statistics, the recheck ANDed
 * bitmaps of whole status indexes with every dead entry since the last vacuum (2,000–3,000 entries of
 * idx_events_waiting_resource per event claim; of idx_action_runs_unfinished and _due per action claim) and
 * filtered the candidates out of them: most of the rows read per event end to end (young-statistics.spec.ts).
 */
function byKey(kind: DatabaseKind, status: string): string {
  return kind === 'postgres' ? unindexed(status) : status;
}

/**
 * The claim of waiting events (`limit` as limitSql writes it; placeholders: see `WorkQueue.claimEventsIn`). The
 * candidates come from three index scans that each stop after `limit` rows: waiting events before the barrier;
 * waiting events after it about seen resources (which never wait for it); and waiting events after it about unseen
 * resources, each checked against the few creating runs in flight through their partial index. Only the last walks
 * past events that must wait, and only those of scopes with a create in flight.
 */
export function claimEventsSql(kind: DatabaseKind, limit: string): string {
  // SQLite would rather walk the status index and filter (it keeps no statistics): point it at the partial indexes.
  const index = (name: string) => (kind === 'sqlite' ? `INDEXED BY ${name}` : '');
  const pg = kind === 'postgres';
  const filters = claimFilters(kind);
  const claimable = (seqBound: string, using = '') => `
    SELECT e.seq FROM events e ${using} WHERE e.status = 'received' AND ${seqBound} AND ${filters} ORDER BY e.seq LIMIT ${limit}`;
  // PostgreSQL computes the barrier once for the three scans (SQLite, which keeps no statistics, gets it inline in each).
  const barrier = pg ? '(SELECT seq FROM barrier)' : barrierSeq(kind);
  // PostgreSQL: through the two partial indexes of waiting events. Planned on young statistics, one scan of
  // `status = 'received'` went along the primary key, through every event already processed.
  const beforeBarrier = pg
    ? `SELECT seq FROM (${claimable(`e.seen_resource AND e.seq < ${barrier}`)}) before_seen
       UNION ALL SELECT seq FROM (${claimable(`NOT e.seen_resource AND e.seq < ${barrier}`)}) before_unseen`
    : `SELECT seq FROM (${claimable(`e.seq < ${barrier}`)}) before_barrier`;
  const unseen = unseenScopedSql(kind, barrier, filters, limit);
  return `${pg ? `WITH barrier AS MATERIALIZED (SELECT ${barrierSeq(kind)} AS seq)` : ''}
    UPDATE events SET lease_owner = ?, lease_until = ?
    WHERE seq ${inCandidates(kind, `
      SELECT c.seq FROM events c
      WHERE c.seq ${inCandidates(kind, `${beforeBarrier}
                      UNION ALL
                      SELECT seq FROM (${claimable(`e.seen_resource AND e.seq >= ${barrier}`, index('idx_events_waiting_seen'))}) seen
                      UNION ALL
                      SELECT seq FROM (${unseen}) unseen`)}
        -- Checked again on the row itself: on PostgreSQL a row another claimer has just leased is re-read here.
        AND ${byKey(kind, 'c.status')} = 'received' AND (c.lease_until IS NULL OR c.lease_until < ?)
      ORDER BY c.seq LIMIT ${limit} ${skipLocked(kind)}`)}
    RETURNING seq, event_id, type, resource_key, payload, depth, attempts`;
}

/**
 * PostgreSQL: due runs of each unfinished status through idx_action_runs_due
 * (status, next_attempt_at), each scan stopping after `limit`: a filter over
 * every unfinished run (or, planned on young statistics, over the whole
 * table) grows with the backlog and the history. (SQLite, without
 * statistics, plans the plain statement well and this one badly.) Run with
 * PLANNED_ONCE_BY_KEY (planned-once.ts): costed from statistics that counted
 * a few runs waiting when hundreds were, each scan read every pending run and
 * sorted them (through a bitmap, every entry of the range, dead ones
 * included: 1,655 entries for a claim that found none in one run of the
 * benchmark; or the whole table); found by key only, it walks the index in
 * due order and stops at the limit.
 */
export function claimActionRunsSql(recover: boolean): string {
  const due = (status: string) => `SELECT * FROM (SELECT id, next_attempt_at FROM action_runs
      WHERE status = '${status}' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
      ORDER BY next_attempt_at LIMIT ?) ${status}_runs`;

  // The runs in due order: the UPDATE returns them in the order it finds them by id.
  return `
    WITH claimed AS (
    UPDATE action_runs
    SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
    WHERE id ${inCandidates('postgres', `
      SELECT c.id FROM action_runs c
      WHERE c.id ${inCandidates('postgres', `SELECT id FROM (${due('pending')} UNION ALL ${due('retrying')}${recover ? ` UNION ALL ${due('running')}` : ''}) d`)}
        -- Checked again on the row itself: on PostgreSQL a row another claimer has just leased is re-read here.
        AND ${byKey('postgres', 'c.status')} IN ('pending', 'retrying', 'running') AND (c.lease_until IS NULL OR c.lease_until < ?)
      ORDER BY c.next_attempt_at LIMIT ? ${skipLocked('postgres')}`)}
    RETURNING ${CLAIMED_RUN}, next_attempt_at)
    SELECT ${CLAIMED_RUN} FROM claimed ORDER BY next_attempt_at, id`;
}

@Injectable()
export class WorkQueue {
  /** Identifies this process's leases. */
  readonly owner = randomUUID();
  private analyzedAt = 0;
  /**
   * PostgreSQL: whether this process's last event claim found nothing. The next one is then planned once per session
   * (the usual case once intake and the outcome commits hand new events over: a wake-up finds nothing to claim);
   * after a claim that found events, for its own values, as the drain of a backlog needs (planned once, claims that
   * found some but fewer than they asked for, behind creates in flight, drained 200,000 waiting events at 0.71x the
   * rate of 5,000 in one run, against 0.85-0.96x before; session 30).
   */
  private lastEventClaimEmpty = false;
  /** The claims' statements, by limit (see limitSql). */
  private readonly claimEventsTexts = new Map<number, string>();
  /** The action claim's statements, by limit (SQLite only) and whether they look for runs whose lease ran out. */
  private readonly claimRunsTexts = new Map<string, string>();
  /** By the clock: when the action claim next looks for running runs whose lease has run out (see `recovering`). */
  private recoverRunsAt = 0;

  constructor(
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async claimEvents(limit: number): Promise<ClaimedEvent[]> {
    return this.db.write((manager) => this.claimEventsIn(statementsOf(manager), limit));
  }

  /**
   * The claim of `claimEvents`, inside a commit already open (`sql`: its statements): the commit that records the
   * outcomes of action runs claims the events they let go, so that those need no claim of their own.
   */
  async claimEventsIn(sql: Statements, limit: number): Promise<ClaimedEvent[]> {
    const now = nowIso(this.clock);
    const lease = [this.owner, isoIn(this.clock, EVENT_LEASE_MS)];
    // PostgreSQL scans before the barrier twice (seen, unseen) and binds the limits; the unseen scan takes the limit
    // twice (unseen-claim.ts).
    const pg = this.db.kind === 'postgres';
    const l = pg ? [limit] : [];
    const before = pg ? [now, now, ...l, now, now, ...l] : [now, now];
    const unseen = [now, now, now, ...l, ...l];
    const params = [...lease, ...before, now, now, ...l, ...unseen, now, ...l];
    // Planned for its values, the claim cost 3.1 ms of planning on the server against 1 ms of execution, and nearly
    // all of those claims find nothing (pg_stat_statements, end to end under load, session 30): planned once, it is
    // found by key alone (planned-once.ts), and its settings last only until the statement after it.
    const plannedOnce = pg && this.lastEventClaimEmpty;
    if (plannedOnce) planOnceByKey(sql);
    const started = performance.now();
    const rows = await sql.rows<ClaimedEvent>(this.claimEventsStatement(limit), params);
    if (plannedOnce) planEachTime(sql);
    this.lastEventClaimEmpty = rows.length === 0;
    this.refreshStatistics(claimWantsStatistics({ plannedOnce, ms: performance.now() - started, taken: rows.length, limit }));
    return rows.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Whether a claim could find an event now; on SQLite one probe of two small indexes, so that a wake-up with
   * nothing to claim costs no claim. Always true on PostgreSQL (see ANY_CLAIMABLE_SQLITE).
   */
  async anyClaimable(): Promise<boolean> {
    if (this.db.kind === 'postgres') return true;
    const now = nowIso(this.clock);
    const [row] = await statementsOf(this.db.manager).rows<{ due: number }>(ANY_CLAIMABLE_SQLITE, [now, now]);
    return Boolean(row?.due);
  }

  /**
   * The lease intake's next commit gives the new events this process may evaluate at once (event-writer.ts
   * FreshLease), `room` at most. Without room it still says which are free to be evaluated, for the commit's decider
   * (FreshEventsHandOff.decider): a decided event takes no room. The others wait for a claim.
   */
  freshLease(room: number): FreshLease {
    room = Math.max(0, room);
    const until = isoIn(this.clock, EVENT_LEASE_MS);
    const kind = this.db.kind;
    // SQLite's lease answers only which are held: the writer stores each it leases with `owner` and `until` itself.
    const params = kind === 'postgres' ? [nowIso(this.clock), this.owner, until, room] : [];
    return { sql: freshLeaseSql(kind), params, room, owner: this.owner, until };
  }

  /**
   * Of the events intake leased held behind creates in flight (FRESH_LEASE_SQLITE, FRESH_LEASE_POSTGRES), oldest
   * first, those no create in flight in their scope holds back now: each scope's oldest create in flight, looked up
   * once. On PostgreSQL found by key only, planned once per session (planned-once.ts), as the last statements of their
   * transaction.
   */
  async goneOn<T extends { held: HeldBehind }>(sql: Statements, parked: readonly T[]): Promise<T[]> {
    const now = nowIso(this.clock);
    const since = new Map<string, string | null>();
    const free: T[] = [];
    if (this.db.kind === 'postgres' && parked.length > 0) planOnceByKey(sql);
    for (const event of parked) {
      const { kind, parent } = event.held.scope;
      const key = parent === null ? kind : `${kind}\u0000${parent}`; // a kind holds no NUL
      let oldest = since.get(key);
      if (oldest === undefined) {
        const [row] = await sql.rows<{ since: string | null }>(HELD_SINCE, [kind, parent, parent, now]);
        since.set(key, (oldest = row?.since ?? null));
      }
      if (oldest === null || event.held.receivedAt < oldest) free.push(event);
    }
    return free;
  }

  /**
   * PostgreSQL: whether an event about one of `resourceKeys` waits for a claim (WAITING_ABOUT), asked as the last
   * statement of an outcome commit (Statements.queueRows: its answer comes with the COMMIT's), so that the event loop
   * claims after that commit only when the runs it ended may have let such an event go.
   */
  waitingAbout(sql: Statements, resourceKeys: string[]): Promise<boolean> {
    if (resourceKeys.length === 0) return Promise.resolve(false);
    const now = nowIso(this.clock);
    planOnceByKey(sql);
    return sql.queueRows<{ waiting: boolean }>(WAITING_ABOUT, [resourceKeys, now, now]).then(([row]) => Boolean(row?.waiting));
  }

  /** The event claim's statement for `limit`, made once (see claimEventsSql). */
  private claimEventsStatement(limit: number): string {
    return textFor(this.claimEventsTexts, limit, () => claimEventsSql(this.db.kind, limitSql(this.db.kind, limit)));
  }


  /**
   * PostgreSQL: a slow claim, or a busy queue (a full batch: the tables are growing), asks for fresh statistics of
   * the tables that have outgrown theirs (statistics.ts), at most every few seconds.
   */
  private refreshStatistics(wanted: boolean): void {
    if (this.db.kind !== 'postgres' || !wanted) return;
    const now = Date.now();
    if (now - this.analyzedAt < ANALYZE_EVERY_MS) return;
    this.analyzedAt = now;
    refreshStaleStatistics(this.db.manager).catch(() => undefined);
  }

  /** Takes due action runs and marks them running; `leaseMs` should outlast one request. */
  async claimActionRuns(limit: number, leaseMs: number): Promise<ClaimedActionRun[]> {
    const now = nowIso(this.clock);
    const lease = [this.owner, isoIn(this.clock, leaseMs), now];
    const written = limitSql(this.db.kind, limit);
    const recover = this.recovering(leaseMs);
    if (this.db.kind === 'sqlite') {
      const text = textFor(this.claimRunsTexts, `${limit} ${recover}`, () => claimRunsSqlite(written, recover));
      return this.db.write((manager) => statementsOf(manager).rows<ClaimedActionRun>(text, [...lease, now, now]));
    }
    const params = [...lease, ...Array<unknown>(recover ? 3 : 2).fill([now, now, limit]).flat(), now, limit];
    const text = textFor(this.claimRunsTexts, `any ${recover}`, () => claimActionRunsSql(recover));
    return this.db.write((manager) => plannedOnce<ClaimedActionRun>(statementsOf(manager), text, params));
  }

  /** The next action claim looks for running runs without a live lease: some were just handed back. */
  recoverRunsNow(): void {
    this.recoverRunsAt = 0;
  }

  /**
   * Whether this action claim also looks for running runs whose lease has run out (their holder died, or handed
   * them back), at most every LEASE_RECOVERY_MS by the clock (sooner when `leaseMs` is shorter), and at once after
   * this process handed leases back. Every run in flight is running and due, so the claim's scan of running runs
   * stepped over all of them each time to find, almost always, none: on PostgreSQL a third of the rows read per
   * event. A lease that ran out is found at most that much later.
   */
  private recovering(leaseMs: number): boolean {
    const now = this.clock.now().getTime();
    const every = Math.min(LEASE_RECOVERY_MS, leaseMs);
    // A clock set back would otherwise put off recovery until it caught up.
    if (now < this.recoverRunsAt && now > this.recoverRunsAt - every) return false;
    this.recoverRunsAt = now + every;
    return true;
  }



  /**
   * On SQLite exactly one engine process owns the file, so leases left by a
   * previous run of it are void at start-up: its work resumes at once instead
   * of after the lease runs out.
   */
  async releaseStaleLeases(): Promise<void> {
    if (this.db.kind !== 'sqlite') return;
    await this.db.write(async (manager) => {
      await queryRows(manager, `UPDATE events SET lease_owner = NULL, lease_until = NULL WHERE seq IN (SELECT seq FROM events INDEXED BY idx_events_leased WHERE lease_owner IS NOT NULL AND status = 'received')`);
      await queryRows(
        manager,
        `UPDATE action_runs SET lease_owner = NULL, lease_until = NULL
         WHERE id IN (SELECT id FROM action_runs INDEXED BY idx_action_runs_leased
                      WHERE lease_owner IS NOT NULL AND status IN ('pending', 'retrying', 'running'))`,
      );
    });
  }

  /** Gives back this process's event leases without changing anything else (shutdown, the end of a storage fault). */
  async releaseMine(): Promise<void> {
    const sql = `UPDATE events SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ? AND status = 'received'`;
    await this.db.write((manager) => queryRows(manager, sql, [this.owner]));
  }

  /**
   * After a storage fault: gives back the leases of this process's action runs
   * but those it is performing now (`performing`, their ids). A run whose
   * outcome could not be written, or whose written outcome the failed disk lost,
   * is taken again at once instead of when its lease runs out; sent again, it
   * keeps its Idempotency-Key. Only leases that run out before `until`: the
   * caller's claims and commits in flight took theirs later, and may have
   * committed them without having their runs in `performing` yet. Returns how
   * many it gave back.
   */
  async releaseMyRuns(performing: Iterable<string>, until: string): Promise<number> {
    const busy = [...performing];
    const notBusy = this.db.kind === 'postgres' ? 'NOT (id = ANY(?::text[]))' : 'id NOT IN (SELECT value FROM json_each(?))';
    const sql = `UPDATE action_runs SET lease_owner = NULL, lease_until = NULL
      WHERE lease_owner = ? AND status IN ('pending', 'retrying', 'running') AND lease_until < ? AND ${notBusy} RETURNING id`;
    const params = [this.owner, until, this.db.kind === 'postgres' ? busy : JSON.stringify(busy)];
    const released = (await this.db.write((manager) => queryRows(manager, sql, params))).length;
    if (released > 0) this.recoverRunsNow();
    return released;
  }

  /** How much work waits: events not yet evaluated, action runs not yet ended (the metrics' queue depths). */
  async depths(): Promise<{ events: number; actions: number }> {
    const [events] = await queryRows<{ n: number | string }>(this.db.manager, `SELECT COUNT(*) AS n FROM events WHERE status = 'received'`);
    const [runs] = await queryRows<{ n: number | string }>(
      this.db.manager,
      `SELECT COUNT(*) AS n FROM action_runs WHERE status IN ('pending', 'running', 'retrying')`,
    );
    return { events: Number(events?.n ?? 0), actions: Number(runs?.n ?? 0) };
  }

  /** Runs a commit may lease to this process directly, up to `room`, for as long as one attempt needs. */
  handOff(leaseMs: number, room: number): HandOff {
    return { owner: this.owner, until: isoIn(this.clock, leaseMs), room };
  }
}
