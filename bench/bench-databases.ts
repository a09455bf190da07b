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
  /** Event rows by status, read beside the running engine (WAL / MVCC readers do not block it). */
  eventStatusCounts(): Promise<Record<string, number>>;
  drop(): Promise<void>;
}

interface SqliteHandle {
  prepare(sql: string): { all(): unknown[] };
  close(): void;
}
// better-sqlite3 ships no types here; this is the little of it the benchmark uses.
const SqliteDatabase = createRequire(import.meta.url)('better-sqlite3') as new (file: string, options: { readonly: boolean }) => SqliteHandle;

const COUNT_SQL = 'SELECT status, COUNT(*) AS n FROM events GROUP BY status';

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
    async eventStatusCounts() {
      const handle = new SqliteDatabase(file, { readonly: true });
      try {
        return toCounts(handle.prepare(COUNT_SQL).all());
      } finally {
        handle.close();
      }
    },
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
  return {
    name: 'postgres',
    url: db.url,
    eventStatusCounts: () => withPostgresClient(db.url, async (c) => toCounts((await c.query(COUNT_SQL)).rows)),
    drop: registered(db, `drop database ${new URL(db.url).pathname.slice(1)}`, cleanup),
  };
}
