/**
 * The statements intake's commits store new events with (event-writer.ts): on SQLite one INSERT an event, with the
 * lease asked just before it; on PostgreSQL one statement for the whole batch, its columns as arrays, leasing (and,
 * with a decider, deciding) in its WITH, after a lock on each of the batch's resources.
 */
import type { Statements } from '../database/statements.js';

const COLUMNS = 'event_id, type, resource_key, scope_kind, scope_parent, status, source, payload, depth, replay_of, received_at, attempts, next_attempt_at, seen_resource, lease_owner, lease_until';
// `seen_resource` (no resource, or one with a snapshot) spares the claim a scan: see the migration that adds it.
/** SQLite, when no decider knows it (BatchDecider.seen): whether the resource has a snapshot now. */
export const HAS_SNAPSHOT = 'SELECT 1 AS seen FROM resource_snapshots WHERE resource_key = ?';
/**
 * SQLite: one prepared statement, run once per event of the batch (in process, no round trips), `seen` as bound (0 or
 * 1), leased as its last two placeholders say (NULL, NULL: unleased). Without RETURNING (Statements.insertOne): a
 * conflict stores nothing.
 */
export const INSERT_ONE = `INSERT INTO events (${COLUMNS}) VALUES (?, ?, ?, ?, ?, 'received', ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
  ON CONFLICT (event_id) DO NOTHING`;

/** SQLite: a new event stored decided (DecidedEvent): finished, never leased, its outcome's columns last. */
export const INSERT_DECIDED = `INSERT INTO events (${COLUMNS}, self_caused, processed_at, explanation)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, NULL, NULL, ?, ?, ?)
  ON CONFLICT (event_id) DO NOTHING`;

const RETURNING = 'ON CONFLICT (event_id) DO NOTHING RETURNING seq, event_id, lease_owner IS NOT NULL AS leased';
/** Whether a leased event is held behind a create in flight: unseen, and received no earlier than its scope's oldest (the lease's `held`). */
const RETURNING_HELD = `, lease_owner IS NOT NULL AND NOT seen_resource AND received_at >= COALESCE(
    (SELECT h.since FROM held h WHERE h.kind = events.scope_kind AND h.parent IS NOT DISTINCT FROM events.scope_parent), '9999') AS held`;

/**
 * SQLite: whether one new event is leased, as `lease` (FreshLease.sql) says: its row, or none. Asked before the
 * event's INSERT_ONE, in the same transaction (SQLite has one writer, and each event's statements see the ones
 * before it). Placeholders: resource_key, scope_kind, scope_parent, received_at, seen (0 or 1), then the lease's
 * (none on SQLite: FreshLease.owner and until are what the INSERT stores). (The lease inside the INSERT, as on
 * PostgreSQL, cost 28 µs an event against 16 for the two apart.)
 */
export const leasedOne = (lease: string) => `WITH batch AS (
    SELECT ? AS resource_key, ? AS scope_kind, ? AS scope_parent, ? AS received_at, ? AS seen, 1 AS ord)
  ${lease}`;

/**
 * PostgreSQL: the whole batch in one statement, whatever its size (columns as arrays), none of it leased (no lease:
 * the event loop is stopped). The snapshot is probed once per event through its primary key (LATERAL … LIMIT 1): as
 * an EXISTS, a large batch on a table with young statistics was planned as a hashed subplan that read every snapshot.
 * Placeholders: received_at, next_attempt_at, the columns.
 */
export const INSERT_MANY = `WITH batch AS MATERIALIZED (
    SELECT t.*, ?::varchar AS received_at, ?::varchar AS next_attempt_at, t.resource_key IS NULL OR s.seen IS NOT NULL AS seen
    FROM unnest(?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::text[], ?::int[], ?::varchar[])
         WITH ORDINALITY AS t(id, type, resource_key, scope_kind, scope_parent, source, payload, depth, replay_of, ord)
    LEFT JOIN LATERAL (SELECT true AS seen FROM resource_snapshots s WHERE s.resource_key = t.resource_key LIMIT 1) s ON true)
  INSERT INTO events (${COLUMNS})
  SELECT b.id, b.type, b.resource_key, b.scope_kind, b.scope_parent, 'received', b.source, b.payload, b.depth, b.replay_of,
         b.received_at, 0, b.next_attempt_at, b.seen, NULL, NULL
  FROM batch b ORDER BY b.ord ${RETURNING}`;

/**
 * PostgreSQL: INSERT_MANY, leased as `lease` (FreshLease.sql: the definitions of `held`, `free` and `leased` for the
 * statement's WITH) says, with what the decider made of each event (Decider.decide, null where it decided nothing),
 * and whether its evaluation read the resource's snapshot (AssumingDecider.readSnapshot): an event free to be evaluated now
 * (`free`, the lease's, where `decided` says which of those are stored decided: not held, and `current`) is stored
 * finished, with its outcome's columns, and its resource's snapshot saved in the same statement; the others as
 * INSERT_MANY stores them, the leased ones leased. `current`: what the evaluation assumed is so (the decider reads nothing first: no
 * provenance, and no snapshot if it read one); an evaluation handed over with a leased event (`evaluatedAt`) holds
 * only then, which the writer tells from each row's `seen_resource` and `untouched` (`assumed`; as a lookup in
 * `batch` for each row, the statement compared every row with every other; `untouched` as a NOT EXISTS was planned as
 * a hashed subplan that read every provenance, 200–1,000 rows read an event end to end). `made`: more definitions for
 * the WITH, over `stored` (AssumingDecider.made: the executions and first runs of the events it stores decided).
 * Placeholders: INSERT_MANY's, then the decisions', then the lease's, then `made`'s.
 */
export function insertDecidingSql(lease: string, made = ''): string {
  return `WITH batch AS MATERIALIZED (
    SELECT t.*, ?::varchar AS received_at, ?::varchar AS next_attempt_at, t.resource_key IS NULL OR s.seen IS NOT NULL AS seen,
           p.touched IS NULL AND (s.seen IS NULL OR NOT COALESCE(t.read_snapshot, true)) AS current
    FROM unnest(?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::varchar[], ?::text[], ?::int[], ?::varchar[],
                ?::varchar[], ?::int[], ?::bool[], ?::text[], ?::text[], ?::bool[])
         WITH ORDINALITY AS t(id, type, resource_key, scope_kind, scope_parent, source, payload, depth, replay_of,
                              decision, decided_depth, decided_self, explanation, snapshot, read_snapshot, ord)
    LEFT JOIN LATERAL (SELECT true AS seen FROM resource_snapshots s WHERE s.resource_key = t.resource_key LIMIT 1) s ON true
    LEFT JOIN LATERAL (SELECT true AS touched FROM resource_provenance p WHERE p.resource_key = t.resource_key LIMIT 1) p ON true),
  ${lease},
  stored AS (
    INSERT INTO events (${COLUMNS}, self_caused, processed_at, explanation)
    SELECT b.id, b.type, b.resource_key, b.scope_kind, b.scope_parent, CASE WHEN f.decided THEN b.decision ELSE 'received' END, b.source,
           b.payload, CASE WHEN f.decided THEN b.decided_depth ELSE b.depth END, b.replay_of, b.received_at, 0, b.next_attempt_at, b.seen,
           l.lease_owner, l.lease_until, f.decided IS TRUE AND b.decided_self, CASE WHEN f.decided THEN b.received_at END,
           CASE WHEN f.decided THEN b.explanation END
    FROM batch b LEFT JOIN free f ON f.ord = b.ord LEFT JOIN leased l ON l.ord = b.ord
    ORDER BY b.ord ${RETURNING}${RETURNING_HELD}, status <> 'received' AS finished, seen_resource,
      (SELECT true FROM resource_provenance p WHERE p.resource_key = events.resource_key LIMIT 1) IS NULL AS untouched),
  snapshots AS (
    INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at)
    SELECT b.resource_key, b.snapshot, s.seq, b.received_at FROM stored s JOIN batch b ON b.id = s.event_id AND b.decision IS NOT NULL
    WHERE s.finished AND b.snapshot IS NOT NULL
    ON CONFLICT (resource_key) DO UPDATE SET payload = excluded.payload, event_seq = excluded.event_seq, updated_at = excluded.updated_at)${made ? `,${made}` : ''}
  SELECT seq, event_id, leased, held, finished, seen_resource, untouched FROM stored`;
}

/**
 * PostgreSQL: the key space of intake's locks on resources (`pg_advisory_xact_lock(int, int)`, a space of its own:
 * the one-key locks the throttle takes never meet these).
 */
const RESOURCE_LOCKS = 0x45564e54;
/**
 * PostgreSQL: intake's transaction takes a lock on each resource of its batch (`hashtext` of the key, in order, so two
 * commits never wait on each other in a circle) before its INSERT. Two replicas storing events about one resource at
 * the same moment then store them one after the other: the second INSERT, started once the first commit is done, sees
 * the first event waiting and leases nothing about that resource, and its seq is the larger. Without it each lease
 * looked past the other's uncommitted event and both were evaluated at once: the later was acted on first in a
 * quarter to a third of such pairs (test/replicas-order.e2e-spec.ts). The lock lasts until the commit; within one process intake commits one batch at
 * a time, so only replicas (or a replay, through the same writer) ever wait for it.
 */
const LOCK_RESOURCES = `SELECT pg_advisory_xact_lock(${RESOURCE_LOCKS}, h)
  FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(?::text[]) AS k WHERE k IS NOT NULL) locks ORDER BY h`;

/** Queued ahead of the INSERT (Statements.queue): it travels in the same write, and the INSERT starts once it is done. */
export function lockResources(sql: Statements, resourceKeys: Array<string | null>): void {
  const keys = resourceKeys.filter((key): key is string => key !== null);
  if (keys.length > 0) sql.queue(LOCK_RESOURCES, [keys]).catch(() => undefined);
}
