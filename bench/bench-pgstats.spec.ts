import { createPostgresDatabase, postgresOnly, postgresUrlForTests, withPostgresClient, type TestDatabase } from '../test/support/databases.js';
import { waitUntil } from '../test/support/wait.js';
import { perEvent } from './bench-closed.js';
import { hotUpdates, settledCounters, subtract } from './bench-pgstats.js';

const onPostgres = (await postgresOnly('bench-pgstats')) ? describe : describe.skip;

onPostgres('what the benchmark reads of PostgreSQL, on a real server', () => {
  let db: TestDatabase;
  const nameOf = (url: string) => new URL(url).pathname.slice(1);

  beforeEach(async () => {
    db = await createPostgresDatabase(postgresUrlForTests, 'bench_pgstats');
  });
  afterEach(async () => {
    await db.drop();
  });

  it('counts the updates of the engine’s tables and which were HOT, and the write-ahead log written meanwhile', async () => {
    const database = nameOf(db.url);
    const before = await settledCounters(postgresUrlForTests, database);
    await withPostgresClient(db.url, async (c) => {
      // Room on each page (fillfactor), so that an update that changes no indexed column can stay on it (HOT).
      await c.query('CREATE TABLE action_runs (id int PRIMARY KEY, status text, note text) WITH (fillfactor = 50)');
      await c.query('CREATE INDEX action_runs_status ON action_runs (status)');
      await c.query('CREATE TABLE elsewhere (id int PRIMARY KEY, note text)');
      await c.query("INSERT INTO action_runs SELECT g, 'pending', '' FROM generate_series(1, 10) g");
      await c.query("INSERT INTO elsewhere SELECT g, '' FROM generate_series(1, 10) g");
      await c.query("UPDATE action_runs SET note = 'seen'"); // no indexed column: HOT
      await c.query("UPDATE action_runs SET status = 'succeeded'"); // an indexed column: a new entry in each index
      await c.query("UPDATE elsewhere SET note = 'not one of the engine''s tables'");
    });
    const after = await settledCounters(postgresUrlForTests, database);

    const written = subtract(after, before);
    expect(written.rowsWritten).toBeGreaterThanOrEqual(50);
    // Ten rows and their index entries at the least, in pages of 8 kB.
    expect(written.walBytes).toBeGreaterThan(8_000);

    // Table statistics reach the database's views when the session that wrote them has ended: wait for them.
    const updates = await waitUntil(
      async () => {
        const read = await hotUpdates(postgresUrlForTests, database);
        return read.updates === 20 && read;
      },
      { timeoutMs: 10_000, what: 'the 20 updates of action_runs in pg_stat_user_tables' },
    );
    expect(updates).toEqual({ updates: 20, hot: 10 });
  });
});

describe('perEvent (what the benchmark prints per event)', () => {
  it('divides every counter by the events, and gives the share of HOT updates', () => {
    const figures = perEvent({ transactions: 140, rowsRead: 20_000, rowsWritten: 8_000, walBytes: 8_400_000 }, 1_000, { updates: 3_000, hot: 750 });
    expect(figures).toEqual({
      events: 1_000,
      perEvent: { transactions: 0.14, rowsRead: 20, rowsWritten: 8, walBytes: 8_400 },
      updates: { perEvent: 3, hotShare: 0.25 },
    });
  });

  it('gives zeros, not NaN, for a run with no events or no updates', () => {
    const figures = perEvent({ transactions: 3, rowsRead: 5, rowsWritten: 1, walBytes: 100 }, 0, { updates: 0, hot: 0 });
    expect(figures.perEvent).toEqual({ transactions: 0, rowsRead: 0, rowsWritten: 0, walBytes: 0 });
    expect(figures.updates).toEqual({ perEvent: 0, hotShare: 0 });
  });
});
