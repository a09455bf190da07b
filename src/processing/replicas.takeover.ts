/**
 * Taking over a dead replica's work, in one transaction: the replica is marked
 * dead only if its row still holds the heartbeat the survivor saw stand still
 * (a conditional UPDATE: a replica that beat meanwhile is left alone, and of
 * two survivors the second finds it dead already and does nothing, on
 * PostgreSQL after waiting for the first's row lock), and its leases are handed
 * back at once: its waiting events and its unfinished action runs become
 * claimable by anyone (the claims take rows whose lease is NULL). Whatever the
 * dead replica still commits on that work changes nothing: every commit is
 * guarded by `lease_owner` (event-commit.ts, execution-progress.ts).
 */
import type { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { statementsOf } from '../database/statements.js';
import type { SeenHeartbeat } from './replicas.watch.js';

export interface Takeover {
  replica: string;
  /** Events it held, handed back. */
  events: number;
  /** Action runs it held, handed back. */
  actionRuns: number;
}

const MARK_DEAD = `UPDATE replicas SET dead_at = ? WHERE id = ? AND heartbeat_at = ? AND dead_at IS NULL AND stopped_at IS NULL`;

const KEYS = { events: 'seq', action_runs: 'id' } as const;
const UNFINISHED = { events: `status = 'received'`, action_runs: `status IN ('pending', 'running', 'retrying')` } as const;
const LEASED_INDEX = { events: 'idx_events_leased', action_runs: 'idx_action_runs_leased' } as const;

/** `FROM … WHERE …` of the unfinished rows leased as `owner` says, through the partial index of leased rows (1764600000000-lease-indexes.ts). */
function leased(db: Database, table: 'events' | 'action_runs', owner: string): string {
  // SQLite keeps no statistics and would walk the status index: name the partial one.
  const indexed = db.kind === 'sqlite' ? `INDEXED BY ${LEASED_INDEX[table]}` : '';
  return `FROM ${table} ${indexed} WHERE lease_owner ${owner} AND ${UNFINISHED[table]}`;
}

const handBack = (db: Database, table: 'events' | 'action_runs') =>
  `UPDATE ${table} SET lease_owner = NULL, lease_until = NULL WHERE ${KEYS[table]} IN (SELECT ${KEYS[table]} ${leased(db, table, '= ?')})`;

/** Marks `replica` dead and hands back its work; undefined when it beat meanwhile or another survivor took it first. */
export function takeOver(db: Database, replica: SeenHeartbeat, now: string): Promise<Takeover | undefined> {
  return db.write(async (manager) => {
    const sql = statementsOf(manager);
    if ((await sql.run(MARK_DEAD, [now, replica.id, replica.heartbeat_at])) === 0) return undefined;
    const events = await sql.run(handBack(db, 'events'), [replica.id]);
    const actionRuns = await sql.run(handBack(db, 'action_runs'), [replica.id]);
    return { replica: replica.id, events, actionRuns };
  });
}

/** How many events and action runs each replica holds now (work in hand), by lease owner. */
export async function workInHand(db: Database): Promise<Map<string, { events: number; actionRuns: number }>> {
  const count = (table: 'events' | 'action_runs') =>
    queryRows<{ owner: string; n: number | string }>(
      db.manager,
      `SELECT lease_owner AS owner, COUNT(*) AS n ${leased(db, table, 'IS NOT NULL')} GROUP BY lease_owner`,
    );
  const [events, runs] = [await count('events'), await count('action_runs')];
  const work = new Map<string, { events: number; actionRuns: number }>();
  const entry = (owner: string) => work.get(owner) ?? work.set(owner, { events: 0, actionRuns: 0 }).get(owner)!;
  for (const { owner, n } of events) entry(owner).events = Number(n);
  for (const { owner, n } of runs) entry(owner).actionRuns = Number(n);
  return work;
}
