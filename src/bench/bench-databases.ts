/**
 * A fresh database per measured run, so no run starts with another's rows or
 * backlog: a SQLite file in a temp folder, or a PostgreSQL database created
 * through the `pg` package and dropped (WITH FORCE) afterwards.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
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

export function createSqliteDatabase(cleanup: Cleanup): BenchDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'engine-bench-db-'));
  const file = join(dir, 'engine.sqlite');
  const drop = cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return {
    name: 'sqlite',
    url: `sqlite:${file}`,
    async eventStatusCounts() {
      const db = new SqliteDatabase(file, { readonly: true });
      try {
        return toCounts(db.prepare(COUNT_SQL).all());
      } finally {
        db.close();
      }
    },
    drop,
  };
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function postgresAnswers(adminUrl: string): Promise<string | undefined> {
  try {
    await withClient(adminUrl, (c) => c.query('SELECT 1'));
    return undefined;
  } catch (error) {
    return (error as Error).message || String(error);
  }
}

export async function createPostgresDatabase(adminUrl: string, cleanup: Cleanup): Promise<BenchDatabase> {
  const name = `engine_bench_${randomBytes(6).toString('hex')}`;
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const drop = cleanup.add(`drop database ${name}`, () =>
    withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  );
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name: 'postgres',
    url: url.toString(),
    eventStatusCounts: () => withClient(url.toString(), async (c) => toCounts((await c.query(COUNT_SQL)).rows)),
    drop,
  };
}
