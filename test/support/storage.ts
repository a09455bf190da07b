/** A real database with the engine's schema, for storage-level suites (no Nest application). */
import { DataSource } from 'typeorm';
import type { Clock } from '../../src/clock.js';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { queryRows } from '../../src/database/sql.js';
import { Database } from '../../src/database/database.service.js';
import { EventWriter } from '../../src/intake/event-writer.js';
import { WorkQueue } from '../../src/processing/work-queue.js';
import { createSqliteDatabase, type DatabaseKindUnderTest, type TestDatabase } from './databases.js';

export async function openDatabase(url: string): Promise<Database> {
  const dataSource = new DataSource(dataSourceOptions(url));
  await dataSource.initialize();
  return new Database(dataSource);
}

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private current = new Date('2026-01-01T00:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

/** What the claim specs work on: a fresh database of one kind, a manual clock, intake's writer and a work queue. */
export interface QueueStore {
  readonly db: Database;
  readonly clock: ManualClock;
  readonly writer: EventWriter;
  readonly queue: WorkQueue;
}

/** For a describe block: a fresh QueueStore for each test, dropped after it. */
export function useQueueStore(kind: DatabaseKindUnderTest): QueueStore {
  let testDb: TestDatabase;
  let store: QueueStore | undefined;
  beforeEach(async () => {
    testDb = await kind.create();
    const db = await openDatabase(testDb.url);
    const clock = new ManualClock();
    store = { db, clock, writer: new EventWriter(db, clock), queue: new WorkQueue(db, clock) };
  });
  afterEach(async () => {
    await store?.db.dataSource.destroy();
    await testDb.drop();
  });
  const current = () => {
    if (!store) throw new Error('the queue store is there only while a test of its describe block runs');
    return store;
  };
  return {
    get db() { return current().db; },
    get clock() { return current().clock; },
    get writer() { return current().writer; },
    get queue() { return current().queue; },
  };
}

/**
 * For a describe block that only reads SQLite's schema and plans: one fresh database with the engine's schema for
 * all its tests, dropped after them. `db()` while the block runs.
 */
export function useSqliteSchema(prefix: string): () => Database {
  let testDb: TestDatabase;
  let db: Database | undefined;
  beforeAll(async () => {
    testDb = createSqliteDatabase(prefix);
    db = await openDatabase(testDb.url);
  });
  afterAll(async () => {
    await db?.dataSource.destroy();
    await testDb.drop();
  });
  return () => {
    if (!db) throw new Error('the schema database is there only while a test of its describe block runs');
    return db;
  };
}

/** A null for each `?` of `sql`: enough to EXPLAIN it. */
export function nullParams(sql: string): null[] {
  return Array<null>((sql.match(/\?/g) ?? []).length).fill(null);
}

/** SQLite's plan of `sql` (EXPLAIN QUERY PLAN), one step a line. */
export async function sqlitePlan(db: Database, sql: string): Promise<string> {
  const plan = await queryRows<{ detail: string }>(db.manager, `EXPLAIN QUERY PLAN ${sql}`, nullParams(sql));
  return plan.map((row) => row.detail).join('\n');
}
