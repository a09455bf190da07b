/**
 * The databases the storage and end-to-end suites run on: SQLite always, and
 * PostgreSQL when a server answers (TEST_POSTGRES_URL, default the local one).
 * Each test gets a database of its own: a fresh SQLite file, or a fresh
 * PostgreSQL database that is dropped afterwards. With REQUIRE_POSTGRES=1 (as
 * .ci/run sets) an unreachable PostgreSQL fails the run instead of being skipped.
 */
import { mkdtempSync } from 'node:fs';
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

const sqlite: DatabaseKindUnderTest = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'engine-test-'));
    return { url: `sqlite:${join(dir, 'engine.sqlite')}`, drop: async () => undefined };
  },
};

async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const postgres: DatabaseKindUnderTest = {
  name: 'postgres',
  async create() {
    const name = `engine_test_${randomBytes(6).toString('hex')}`;
    await withAdminClient((c) => c.query(`CREATE DATABASE ${name}`));
    const url = new URL(POSTGRES_URL);
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      drop: () => withAdminClient((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
    };
  },
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

export const postgresUrlForTests = POSTGRES_URL;
export { checkPostgres };
