import type pg from 'pg';
import { postgresOnly, postgresUrlForTests, withPostgresClient } from '../test/support/databases.js';
import { openDatabase } from '../test/support/storage.js';
import { Cleanup } from './bench-cleanup.js';
import { createPostgresDatabase, type BenchDatabase } from './bench-databases.js';
import { waitingEvents } from './bench-events.js';
import { settleStorage } from './bench-waiting-seed.js';

const onPostgres = (await postgresOnly('bench-databases')) ? describe : describe.skip;

type Query = (sql: string) => Promise<Array<{ at: string }>>;

/** A write-ahead log position as a number, from PostgreSQL's `X/Y` form. */
async function lsnOf(query: Query, sql: string): Promise<bigint> {
  const [high, low] = (await query(sql))[0].at.split('/').map((part) => BigInt(`0x${part}`));
  return (high << 32n) + low;
}
/** Where the server is writing its log now. */
const writingAt = (query: Query) => lsnOf(query, 'SELECT pg_current_wal_insert_lsn()::text AS at');
/** Where the last checkpoint began. */
const lastCheckpoint = (query: Query) => lsnOf(query, 'SELECT redo_lsn::text AS at FROM pg_control_checkpoint()');
const clientQuery = (c: pg.Client): Query => async (sql) => (await c.query<{ at: string }>(sql)).rows;

onPostgres('a backlog stored by the benchmark, on a real PostgreSQL server', () => {
  const cleanup = new Cleanup();
  let db: BenchDatabase;

  beforeEach(async () => {
    db = await createPostgresDatabase(postgresUrlForTests, cleanup);
    // The engine's migrations make the schema, as the backlog part runs them.
    await (await openDatabase(db.url)).dataSource.destroy();
  });
  afterEach(async () => {
    await db.drop();
  });

  it('is stored waiting, analysed, and checkpointed before the engine starts', async () => {
    const before = await withPostgresClient(db.url, (c) => writingAt(clientQuery(c)));
    await db.insertWaitingEvents(waitingEvents('matching', 'bench_db_spec_', 25));
    const [checkpointed, analysed] = await withPostgresClient(db.url, async (c) => [
      await lastCheckpoint(clientQuery(c)),
      Number((await c.query<{ n: string }>("SELECT COUNT(*) AS n FROM pg_stat_user_tables WHERE relname = 'events' AND last_analyze IS NOT NULL")).rows[0].n),
    ]);

    expect(await db.eventStatusCounts()).toEqual({ received: 25 });
    expect(analysed).toBe(1);
    // A checkpoint began after the insert had begun: its writes are not left to one during the timed drain. (Other
    // suites' databases, made or dropped meanwhile, checkpoint too; alone, only insertWaitingEvents's does.)
    expect(checkpointed).toBeGreaterThan(before);
  });

  it('is checkpointed again when the waiting part settles its copy before timing claims', async () => {
    const store = await openDatabase(db.url);
    try {
      const query: Query = (sql) => store.dataSource.query(sql);
      const before = await writingAt(query);
      await settleStorage(store);
      expect(await lastCheckpoint(query)).toBeGreaterThan(before);
    } finally {
      await store.dataSource.destroy();
    }
  });
});
