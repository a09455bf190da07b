/**
 * A copy of a benchmark database as it is at one moment, beside it, for
 * timing the same statement on both alternately (bench-waiting.ts).
 *
 * Why: the `waiting` part compares an empty claim on the database with one
 * waiting execution against the same claim once 100,000 are waiting. Timed one
 * after the other, a minute apart, the two medians (some 30 µs on SQLite, half
 * a millisecond on PostgreSQL) took whatever else the shared machine was doing
 * in that minute, and their ratio went from 0.38× to 1.32× between runs of
 * the same code. The copy keeps the first state at hand, so the claims can be
 * timed in turns, each state in the same moments as the other.
 *
 * SQLite: `VACUUM INTO` a file beside the original. PostgreSQL: a database
 * made with the original as its template (statistics included), which needs
 * every other session on the original gone: the engine is stopped by then, and
 * the caller's own connection is closed and opened again around the copy.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Database } from '../src/database/database.service.js';
import { withPostgresClient } from '../test/support/databases.js';
import { openDatabase } from '../test/support/storage.js';
import type { BenchDatabase } from './bench-databases.js';
import type { Cleanup } from './bench-cleanup.js';

export interface Twin {
  /** The copy, opened. */
  store: Database;
  /** Closes the copy and removes it. */
  drop(): Promise<void>;
}

/**
 * Copies `db` (open as `store`, which stays usable) as it is now; nothing else may be connected to it.
 * `serverUrl`: PostgreSQL's server, as the benchmark was given it (where the copy is made).
 */
export async function twinOf(db: BenchDatabase, store: Database, cleanup: Cleanup, serverUrl?: string): Promise<Twin> {
  if (db.name === 'sqlite') return sqliteTwin(db, store, cleanup);
  if (serverUrl === undefined) throw new Error('a copy of a PostgreSQL database needs the server it is on');
  return postgresTwin(db, store, cleanup, serverUrl);
}

async function sqliteTwin(db: BenchDatabase, store: Database, cleanup: Cleanup): Promise<Twin> {
  const file = join(dirname(db.where), `twin-${randomBytes(4).toString('hex')}.sqlite`);
  await store.dataSource.query(`VACUUM INTO '${file.replace(/'/g, "''")}'`);
  const twin = await openDatabase(`sqlite:${file}`);
  const drop = cleanup.add(`remove the copy ${file}`, async () => {
    if (twin.dataSource.isInitialized) await twin.dataSource.destroy();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  });
  return { store: twin, drop };
}

async function postgresTwin(db: BenchDatabase, store: Database, cleanup: Cleanup, serverUrl: string): Promise<Twin> {
  const name = `${db.where}_twin_${randomBytes(3).toString('hex')}`;
  const server = new URL(serverUrl);
  await store.dataSource.destroy();
  try {
    await withPostgresClient(server.toString(), async (c) => {
      // Sessions of the stopped engine that the server has not yet seen go.
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.where]);
      await c.query(`CREATE DATABASE ${name} TEMPLATE ${db.where}`);
    });
  } finally {
    await store.dataSource.initialize();
  }
  const url = new URL(db.url);
  url.pathname = `/${name}`;
  const twin = await openDatabase(url.toString());
  const drop = cleanup.add(`drop the copy ${name}`, async () => {
    if (twin.dataSource.isInitialized) await twin.dataSource.destroy();
    await withPostgresClient(server.toString(), (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  });
  return { store: twin, drop };
}
