import type pg from 'pg';
import { postgresOnly, postgresUrlForTests, withPostgresClient } from '../test/support/databases.js';
import { openDatabase } from '../test/support/storage.js';
import { Cleanup } from './bench-cleanup.js';
import { createPostgresDatabase, type BenchDatabase } from './bench-databases.js';
import { waitingEvents } from './bench-events.js';
import { settleStorage } from './bench-waiting-seed.js';

const onPostgres = (await postgresOnly('bench-databases')) ? describe : describe.skip;

/** The server's write-ahead log position as a number, from PostgreSQL's `X/Y` form. */
const lsn = (text: string) => {
  const [high, low] = text.split('/').map((part) => BigInt(`0x${part}`));
  return (high << 32n) + low;
};

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
    const insertAt = (c: pg.Client) => c.query<{ at: string }>('SELECT pg_current_wal_insert_lsn()::text AS at').then((r) => lsn(r.rows[0].at));
    const before = await withPostgresClient(db.url, insertAt);
    await db.insertWaitingEvents(waitingEvents('matching', 'bench_db_spec_', 25));
    const [checkpointed, analysed] = await withPostgresClient(db.url, async (c) => [
      lsn((await c.query<{ redo: string }>('SELECT redo_lsn::text AS redo FROM pg_control_checkpoint()')).rows[0].redo),
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
      const before = lsn((await store.dataSource.query<Array<{ at: string }>>('SELECT pg_current_wal_insert_lsn()::text AS at'))[0].at);
      await settleStorage(store);
      const [{ redo }] = await store.dataSource.query<Array<{ redo: string }>>('SELECT redo_lsn::text AS redo FROM pg_control_checkpoint()');
      expect(lsn(redo)).toBeGreaterThan(before);
    } finally {
      await store.dataSource.destroy();
    }
  });
});
