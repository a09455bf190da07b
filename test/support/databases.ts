/**
 * The databases the storage and end-to-end suites run on: SQLite always, and
 * PostgreSQL when a server answers (TEST_POSTGRES_URL, default the local one).
 * Each test gets a database of its own: a fresh SQLite file, or a fresh
 * PostgreSQL database that is dropped afterwards. With REQUIRE_POSTGRES=1 (as
 * .ci/run sets) an unreachable PostgreSQL fails the run instead of being skipped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export interface DatabaseKindUnderTest {
  name: 'sqlite' | 'postgres';
  create(): Promise<TestDatabase>;
}

const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A fresh SQLite file in a temp folder of its own (`<prefix>XXXXXX`); drop() removes the folder. */
export function createSqliteDatabase(prefix = 'engine-test-'): TestDatabase {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { url: `sqlite:${join(dir, 'engine.sqlite')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

const sqlite: DatabaseKindUnderTest = {
  name: 'sqlite',
  create: async () => createSqliteDatabase(),
};

/** SQLite alone, for what only SQLite does. */
export const sqliteUnderTest = (): DatabaseKindUnderTest => sqlite;

/** A short-lived client of the PostgreSQL server or database at `url`. */
export async function withPostgresClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withPostgresClient(POSTGRES_URL, work);
}

/** A fresh database `<prefix>_<hex>` on the server at `serverUrl`; drop() drops it WITH (FORCE). */
export async function createPostgresDatabase(serverUrl = POSTGRES_URL, prefix = 'engine_test'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await withPostgresClient(serverUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withPostgresClient(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

const postgres: DatabaseKindUnderTest = {
  name: 'postgres',
  create: () => createPostgresDatabase(),
};

let postgresReachable: Promise<boolean> | undefined;

function checkPostgres(): Promise<boolean> {
  postgresReachable ??= withAdminClient((c) => c.query('SELECT 1')).then(
    () => true,
    () => false,
  );
  return postgresReachable;
}

/** SQLite, plus PostgreSQL when reachable; says plainly when PostgreSQL is skipped. */
export async function databasesUnderTest(suite: string): Promise<DatabaseKindUnderTest[]> {
  if (await checkPostgres()) return [sqlite, postgres];
  if (process.env.REQUIRE_POSTGRES === '1') {
    throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=1) but ${POSTGRES_URL} does not answer`);
  }
  process.stderr.write(`\n  SKIPPED: "${suite}" on PostgreSQL: no server answers at ${POSTGRES_URL}\n\n`);
  return [sqlite];
}

/**
 * For a suite that runs on PostgreSQL only (replicas): whether it can run. Throws when REQUIRE_POSTGRES=1 and no
 * server answers; otherwise says plainly that the suite is skipped.
 */
export async function postgresOnly(suite: string): Promise<boolean> {
  if (await checkPostgres()) return true;
  if (process.env.REQUIRE_POSTGRES === '1') throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=1) but ${POSTGRES_URL} does not answer`);
  process.stderr.write(`\n  SKIPPED: "${suite}": it needs PostgreSQL and no server answers at ${POSTGRES_URL}\n\n`);
  return false;
}

export const postgresUrlForTests = POSTGRES_URL;
export { checkPostgres };
