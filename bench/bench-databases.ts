/**
 * A fresh database per measured run, so no run starts with another's rows or
 * backlog. Made by the tests' own helpers (test/support/databases.ts): a SQLite
 * file in a temp folder, or a PostgreSQL database `engine_bench_<hex>` dropped
 * (WITH FORCE) afterwards. What the benchmark adds: each database is registered
 * for clean-up, and can count its events by status while the engine runs.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { createPostgresDatabase as createTestPostgres, createSqliteDatabase as createTestSqlite, withPostgresClient, type TestDatabase } from '../test/support/databases.js';
import type { Cleanup } from './bench-cleanup.js';

export type DatabaseName = 'sqlite' | 'postgres';

export interface BenchDatabase {
  name: DatabaseName;
  url: string;
  /** SQLite: the file; PostgreSQL: the database's name. */
  where: string;
  /** Event rows by status, read beside the running engine (WAL / MVCC readers do not block it). */
  eventStatusCounts(): Promise<Record<string, number>>;
  /** Events received and not yet processed. */
  waiting(): Promise<number>;
  /**
   * Stores events as the engine's intake would have (src/intake/event-writer.ts:
   * same columns, status `received`), with the engine stopped: a backlog.
   */
  insertWaitingEvents(events: WaitingEvent[]): Promise<void>;
  drop(): Promise<void>;
}

export interface WaitingEvent {
  id: string;
  type: string;
  resourceKey: string | null;
  payload: string;
}

interface SqliteHandle {
  prepare(sql: string): { all(...params: unknown[]): unknown[]; run(...params: unknown[]): unknown };
  transaction(work: () => void): () => void;
  close(): void;
}
// better-sqlite3 ships no types here; this is the little of it the benchmark uses.
const SqliteDatabase = createRequire(import.meta.url)('better-sqlite3') as new (file: string, options: { readonly: boolean }) => SqliteHandle;

const COUNT_SQL = 'SELECT status, COUNT(*) AS n FROM events GROUP BY status';
const WAITING_SQL = "SELECT COUNT(*) AS n FROM events WHERE status = 'received'";
/** The columns src/intake/event-writer.ts writes; a change there needs one here. */
const COLUMNS = 'event_id, type, resource_key, status, source, payload, depth, replay_of, received_at, attempts, next_attempt_at';
const SQLITE_INSERT = `INSERT INTO events (${COLUMNS}) VALUES (?, ?, ?, 'received', 'webhook', ?, 0, NULL, ?, 0, ?)`;
const POSTGRES_INSERT = `INSERT INTO events (${COLUMNS})
  SELECT id, type, rk, 'received', 'webhook', payload, 0, NULL, $5, 0, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(id, type, rk, payload)`;
const POSTGRES_CHUNK = 10_000;

function withSqlite<T>(file: string, readonly: boolean, work: (handle: SqliteHandle) => T): T {
  const handle = new SqliteDatabase(file, { readonly });
  try {
    return work(handle);
  } finally {
    handle.close();
  }
}

function insertIntoSqlite(file: string, events: WaitingEvent[]): void {
  const now = new Date().toISOString();
  withSqlite(file, false, (handle) => {
    const insert = handle.prepare(SQLITE_INSERT);
    handle.transaction(() => {
      for (const e of events) insert.run(e.id, e.type, e.resourceKey, e.payload, now, now);
    })();
  });
}

async function insertIntoPostgres(url: string, events: WaitingEvent[]): Promise<void> {
  const now = new Date().toISOString();
  await withPostgresClient(url, async (c) => {
    for (let i = 0; i < events.length; i += POSTGRES_CHUNK) {
      const chunk = events.slice(i, i + POSTGRES_CHUNK);
      await c.query(POSTGRES_INSERT, [chunk.map((e) => e.id), chunk.map((e) => e.type), chunk.map((e) => e.resourceKey), chunk.map((e) => e.payload), now]);
    }
    // As autovacuum would have by the time a backlog this size had arrived over time.
    await c.query('ANALYZE events');
    await checkpointPostgres((sql) => c.query(sql));
  });
}

/**
 * The server's writes of what the benchmark just stored (its dirty pages, its log), done now rather than by a
 * checkpoint that falls into the timed run: 200,000 events are some 300 MB written. After the end-to-end runs (which
 * leave gigabytes of log behind them) the backlog's drain ran at 0.79× the rate with fewer waiting without it, 0.90×
 * and 0.92× with it (1.12× alone); what a full run still loses there is the table outgrowing the server's shared
 * buffers (session 48, bench/README.md). CHECKPOINT needs a superuser or pg_checkpoint: without, the run goes on as
 * before.
 */
export async function checkpointPostgres(query: (sql: string) => Promise<unknown>): Promise<void> {
  try {
    await query('CHECKPOINT');
  } catch (error) {
    if ((error as { code?: string }).code !== INSUFFICIENT_PRIVILEGE) throw error;
  }
}
const INSUFFICIENT_PRIVILEGE = '42501';

function toCounts(rows: unknown[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const row of rows as Array<{ status: string; n: number | string }>) counts[row.status] = Number(row.n);
  return counts;
}

function registered(db: TestDatabase, what: string, cleanup: Cleanup): () => Promise<void> {
  return cleanup.add(what, () => db.drop());
}

export function createSqliteDatabase(cleanup: Cleanup): BenchDatabase {
  const db = createTestSqlite('engine-bench-db-');
  const file = db.url.slice('sqlite:'.length);
  return {
    name: 'sqlite',
    url: db.url,
    where: file,
    eventStatusCounts: async () => withSqlite(file, true, (handle) => toCounts(handle.prepare(COUNT_SQL).all())),
    waiting: async () => withSqlite(file, true, (handle) => Number((handle.prepare(WAITING_SQL).all()[0] as { n: number }).n)),
    insertWaitingEvents: async (events) => insertIntoSqlite(file, events),
    drop: registered(db, `remove ${dirname(file)}`, cleanup),
  };
}

/** Undefined when the server at `serverUrl` answers, else why not. */
export async function postgresAnswers(serverUrl: string): Promise<string | undefined> {
  try {
    await withPostgresClient(serverUrl, (c) => c.query('SELECT 1'));
    return undefined;
  } catch (error) {
    return (error as Error).message || String(error);
  }
}

export async function createPostgresDatabase(serverUrl: string, cleanup: Cleanup): Promise<BenchDatabase> {
  const db = await createTestPostgres(serverUrl, 'engine_bench');
  const name = new URL(db.url).pathname.slice(1);
  return {
    name: 'postgres',
    url: db.url,
    where: name,
    eventStatusCounts: () => withPostgresClient(db.url, async (c) => toCounts((await c.query(COUNT_SQL)).rows)),
    waiting: () => withPostgresClient(db.url, async (c) => Number((await c.query<{ n: string }>(WAITING_SQL)).rows[0].n)),
    insertWaitingEvents: (events) => insertIntoPostgres(db.url, events),
    drop: registered(db, `drop database ${name}`, cleanup),
  };
}
