/**
 * The hot path's statements (statements.ts) on a real database of each kind: rows, counts, a failed statement's own
 * error, and on PostgreSQL each statement prepared once per session, a queued statement's failure failing the commit,
 * and the pool (outside a transaction) answering as a session does.
 */
import { databasesUnderTest } from '../../test/support/databases.js';
import { useQueueStore } from '../../test/support/storage.js';
import { statementsOf } from './statements.js';

const kinds = await databasesUnderTest('hot-path statements');

describe.each(kinds)('hot-path statements on $name', (kind) => {
  const store = useQueueStore(kind);
  /** A table of one key, for the refusals below. */
  const createProbe = () => store.db.write((manager) => statementsOf(manager).run('CREATE TABLE statements_probe (id INTEGER PRIMARY KEY)'));

  it('answers rows and counts inside a transaction, each statement with its own parameters', async () => {
    const answered = await store.db.write(async (manager) => {
      const sql = statementsOf(manager);
      await sql.run('CREATE TABLE statements_probe (id INTEGER PRIMARY KEY, label VARCHAR(40))');
      const inserted = await sql.run('INSERT INTO statements_probe (id, label) VALUES (?, ?), (?, ?)', [1, 'one', 2, 'two']);
      const first = await sql.rows<{ label: string }>('SELECT label FROM statements_probe WHERE id = ?', [1]);
      const second = await sql.rows<{ label: string }>('SELECT label FROM statements_probe WHERE id = ?', [2]);
      return { inserted, first, second };
    });
    expect(answered).toEqual({ inserted: 2, first: [{ label: 'one' }], second: [{ label: 'two' }] });
  });

  it("fails with the database's own error, and leaves nothing of the transaction", async () => {
    await createProbe();
    const failed = store.db.write(async (manager) => {
      const sql = statementsOf(manager);
      await sql.run('INSERT INTO statements_probe (id) VALUES (?)', [7]);
      await sql.run('INSERT INTO statements_probe (id) VALUES (?)', [7]);
    });
    // Matched by its message, not toThrow: in a later spec file of the same jest worker SQLite's errors are no
    // `instanceof Error` (README, Tests).
    await expect(failed).rejects.toMatchObject({ message: expect.stringMatching(kind.name === 'postgres' ? /duplicate key/ : /UNIQUE constraint/) });
    expect(await statementsOf(store.db.manager).rows('SELECT id FROM statements_probe')).toEqual([]);
  });

  if (kind.name !== 'postgres') return;

  it('prepares each statement once per session, however often it runs', async () => {
    const prepared = await store.db.write(async (manager) => {
      const sql = statementsOf(manager);
      for (let n = 0; n < 5; n++) expect(await sql.rows<{ n: number }>('SELECT ?::int AS n', [n])).toEqual([{ n }]);
      return sql.rows<{ count: string }>("SELECT COUNT(*) AS count FROM pg_prepared_statements WHERE statement LIKE 'SELECT $1::int AS n%'");
    });
    expect(Number(prepared[0]!.count)).toBe(1);
  });

  it("fails the commit with a queued statement's error, and stores nothing of it", async () => {
    await createProbe();
    const failed = store.db.write(async (manager) => {
      const sql = statementsOf(manager);
      void sql.queue('INSERT INTO statements_probe (id) VALUES (?)', [1]);
      void sql.queue('INSERT INTO statements_probe (id) VALUES (?)', [1]);
      const rows = sql.queueRows('SELECT 1 AS one'); // sent behind the failed one: refused, as the commit is
      return { rows };
    });
    await expect(failed).rejects.toMatchObject({ message: expect.stringMatching(/duplicate key/) });
    expect(await statementsOf(store.db.manager).rows('SELECT id FROM statements_probe')).toEqual([]);
  });

  it('runs on the pool outside a transaction as on a session', async () => {
    const sql = statementsOf(store.db.manager);
    const answers = await Promise.all([1, 2, 3].map((n) => sql.rows<{ n: number }>('SELECT ?::int AS n', [n])));
    expect(answers).toEqual([[{ n: 1 }], [{ n: 2 }], [{ n: 3 }]]);
    await expect(sql.rows('SELECT * FROM no_such_table')).rejects.toMatchObject({ message: expect.stringMatching(/no_such_table/) });
  });
});
