/**
 * Every migration's `down()` on a real database of each kind: reverted one by
 * one from the newest, each leaves the schema exactly as the migrations before
 * it made it (compared with a database migrated only that far), and the last
 * leaves no table of the engine's. Then migrated up again, the schema is the
 * one a fresh database gets. Until session 41 no test ran a `down()`.
 * SQLite's definitions are compared without quotes and extra spaces: a
 * `down()` writes again, by hand, an index TypeORM first wrote quoted.
 */
import { DataSource } from 'typeorm';
import { databasesUnderTest, type TestDatabase } from '../../test/support/databases.js';
import { dataSourceOptions, MIGRATIONS } from './data-source.js';
import { queryRows } from './sql.js';

const kinds = await databasesUnderTest('migrations up and down');

/** The schema's tables, columns, indexes (with their definitions) and constraints, in a stable order, TypeORM's own table aside. */
async function schemaOf(dataSource: DataSource, kind: string): Promise<string[]> {
  if (kind === 'sqlite') {
    const rows = await queryRows<{ type: string; name: string; sql: string | null }>(
      dataSource.manager,
      `SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name <> 'migrations' AND tbl_name <> 'migrations' ORDER BY type, name`,
    );
    // SQLite keeps each definition's text as written: compared without quotes and extra spaces (TypeORM quotes names).
    const text = (sql: string | null) => (sql ?? '').replace(/"/g, '').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').trim();
    return rows.map((r) => `${r.type} ${r.name}: ${text(r.sql)}`);
  }
  const columns = await queryRows<{ line: string }>(
    dataSource.manager,
    `SELECT table_name || '.' || column_name || ' ' || data_type || COALESCE('(' || character_maximum_length || ')', '') || ' ' || is_nullable || ' ' || COALESCE(column_default, '') AS line
     FROM information_schema.columns WHERE table_schema = current_schema() AND table_name <> 'migrations' ORDER BY table_name, column_name`,
  );
  const indexes = await queryRows<{ line: string }>(
    dataSource.manager,
    `SELECT indexname || ': ' || indexdef AS line FROM pg_indexes WHERE schemaname = current_schema() AND tablename <> 'migrations' ORDER BY indexname`,
  );
  const options = await queryRows<{ line: string }>(
    dataSource.manager,
    `SELECT relname || ' ' || array_to_string(reloptions, ',') AS line FROM pg_class
     WHERE relnamespace = current_schema()::regnamespace AND reloptions IS NOT NULL ORDER BY relname`,
  );
  return [...columns, ...indexes, ...options].map((r) => r.line);
}

describe.each(kinds)('the migrations on $name', (kind) => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await kind.create();
  });

  afterAll(async () => {
    await db.drop();
  });

  /** The schema of the database migrated through the first `count` migrations, from where it is (up only). */
  async function migratedThrough(count: number): Promise<string[]> {
    const dataSource = new DataSource({ ...dataSourceOptions(db.url), migrations: MIGRATIONS.slice(0, count), migrationsRun: true });
    await dataSource.initialize();
    try {
      return await schemaOf(dataSource, kind.name);
    } finally {
      await dataSource.destroy();
    }
  }

  it(`reverts each of the ${MIGRATIONS.length} to the schema before it, then all of them up again`, async () => {
    // The schema after each migration, one at a time up.
    const schemas: string[][] = [[]];
    for (let count = 1; count <= MIGRATIONS.length; count += 1) schemas.push(await migratedThrough(count));
    const fresh = schemas[MIGRATIONS.length]!;
    expect(fresh.length).toBeGreaterThan(20);
    const dataSource = new DataSource({ ...dataSourceOptions(db.url), migrationsRun: false });
    await dataSource.initialize();
    try {
      const differences: string[] = [];
      for (let count = MIGRATIONS.length - 1; count >= 0; count -= 1) {
        await dataSource.undoLastMigration({ transaction: 'each' });
        const got = await schemaOf(dataSource, kind.name);
        const expected = schemas[count]!;
        const missing = expected.filter((line) => !got.includes(line));
        const left = got.filter((line) => !expected.includes(line));
        if (missing.length > 0 || left.length > 0) differences.push(`${MIGRATIONS[count]!.name} down: missing ${JSON.stringify(missing)}, left ${JSON.stringify(left)}`);
      }
      expect(differences).toEqual([]);
      await dataSource.runMigrations({ transaction: 'each' });
      expect(await schemaOf(dataSource, kind.name)).toEqual(fresh);
    } finally {
      await dataSource.destroy();
    }
  }, 240_000);
});
