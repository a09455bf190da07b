import { randomUUID } from 'node:crypto';
import { readdirSync, readlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Logger } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { StorageUnavailableError } from '../errors.js';
import { databasesUnderTest, postgresUrlForTests, withPostgresClient, type TestDatabase } from '../../test/support/databases.js';
import { dataSourceOptions, SQLITE_CACHE_KIB, SQLITE_CHECKPOINT_PAGES } from './data-source.js';
import { Database } from './database.service.js';
import { queryRows } from './sql.js';
import { statementsOf } from './statements.js';
import { reopenSqlite } from './transactions.js';
import { QUIET_MS } from './storage-health.js';

const kinds = await databasesUnderTest('database writes after a failed commit');

/** A fault ends with a write that goes through once none has failed for QUIET_MS. */
async function faultEnds(db: Database): Promise<boolean> {
  await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
  return (await db.probe()) && db.health.current === undefined;
}

/** better-sqlite3, as much of it as these tests use (it ships no types). */
interface SqliteConnection {
  readonly inTransaction: boolean;
  prepare(sql: string): { all(): unknown[] };
  close(): void;
}
const BetterSqlite3 = createRequire(import.meta.url)('better-sqlite3') as new (file: string, options?: { readonly?: boolean }) => SqliteConnection;

/** The connection TypeORM shares on SQLite. */
function sqliteConnection(db: Database): SqliteConnection {
  return (db.dataSource.driver as unknown as { databaseConnection: SqliteConnection }).databaseConnection;
}

/** Rows of `notes` as another connection sees them: only what was committed. */
async function committedNotes(kind: 'sqlite' | 'postgres', url: string): Promise<string[]> {
  if (kind === 'postgres') {
    return withPostgresClient(url, async (c) => (await c.query<{ body: string }>('SELECT body FROM notes ORDER BY body')).rows.map((r) => r.body));
  }
  const other = new BetterSqlite3(url.slice('sqlite:'.length), { readonly: true });
  try {
    return (other.prepare('SELECT body FROM notes ORDER BY body').all() as Array<{ body: string }>).map((r) => r.body);
  } finally {
    other.close();
  }
}

/**
 * A COMMIT refused for a deferred foreign key, by its message. Not `toThrow`: on SQLite the COMMIT's error is
 * better-sqlite3's own SqliteError, an Error only by its prototype, and jest runs each test file in a realm of its
 * own while a worker loads the native addon once, so the error a later file sees is built by an earlier file's
 * SqliteError and is no `instanceof Error` of its realm: `toThrow` then reports that nothing was thrown.
 */
const foreignKeyRefusal = { message: expect.stringMatching(/FOREIGN KEY|foreign key/) };

describe.each(kinds)(`${Database.name} on $name`, (kind) => {
  let testDb: TestDatabase;
  let db: Database;

  /** The engine's database with one connection at most, so "the same connection" is the only one there is. */
  async function open(): Promise<Database> {
    const options = dataSourceOptions(testDb.url);
    const dataSource = new DataSource(options.type === 'postgres' ? { ...options, poolSize: 1 } : options);
    await dataSource.initialize();
    return new Database(dataSource);
  }

  const note = (body: string) => (m: Parameters<Parameters<Database['write']>[0]>[0]) => queryRows(m, 'INSERT INTO notes (body) VALUES (?)', [body]);

  beforeAll(() => Logger.overrideLogger(false)); // the fault's start and end are logged; not wanted among test output

  beforeEach(async () => {
    testDb = await kind.create();
    db = await open();
    await db.write((m) => queryRows(m, 'CREATE TABLE notes (body VARCHAR(4000) NOT NULL)'));
  }, 30_000);

  afterEach(async () => {
    if (db.dataSource.isInitialized) await db.dataSource.destroy();
    await testDb.drop();
  }, 30_000);

  describe('durability', () => {
    /** How the transaction a write runs in is synced: SQLite's synchronous (1 NORMAL, 2 FULL), PostgreSQL's synchronous_commit. */
    const syncing = (m: Parameters<Parameters<Database['write']>[0]>[0]) =>
      kind.name === 'postgres'
        ? queryRows<{ synchronous_commit: string }>(m, 'SHOW synchronous_commit').then(([row]) => row?.synchronous_commit)
        : queryRows<{ synchronous: number }>(m, 'PRAGMA synchronous').then(([row]) => (row?.synchronous === 2 ? 'on' : row?.synchronous === 1 ? 'off' : String(row?.synchronous)));

    // PostgreSQL syncs its bookkeeping too: it leases runs before their requests and records their answers, and a
    // crash of the server that lost them sent the requests again (database.service.ts).
    const bookkeeping = kind.name === 'postgres' ? 'on' : 'off';

    it('syncs a durable write before it returns, and the bookkeeping as the database needs it', async () => {
      expect(await db.write(syncing, { durable: true })).toBe('on');
      expect(await db.write(syncing)).toBe(bookkeeping);
      expect(await db.write(syncing, { durable: true })).toBe('on');
      expect(await db.write(syncing)).toBe(bookkeeping);
    });
  });


  if (kind.name === 'sqlite') {
    describe('statement journals', () => {
      /** SQLite's temporary files (etilqs_…) this process holds open; they are unlinked at once, so only /proc sees them. */
      const temporaryFiles = () =>
        readdirSync('/proc/self/fd').flatMap((fd) => {
          try {
            return readlinkSync(`/proc/self/fd/${fd}`).includes('etilqs_') ? [fd] : [];
          } catch {
            return []; // closed since it was listed
          }
        });

      it('are kept in memory, also after the connection is reopened: a large statement sends the transaction to no temporary file', async () => {
        const body = 'x'.repeat(3_000); // a page of its own per row
        await db.write(async (m) => {
          for (let i = 0; i < 100; i++) await statementsOf(m).run('INSERT INTO notes (body) VALUES (?)', [`${i}${body}`]);
        });
        // A statement that changes pages stored before its transaction journals them (here ~400 KiB, past the
        // 64 KiB SQLite keeps in memory when temporary files go to disk); the statements after it journal too.
        const filesDuringUpdate = async () =>
          db.write(async (m) => {
            await statementsOf(m).run("UPDATE notes SET body = body || 'y'");
            await statementsOf(m).run("UPDATE notes SET body = body || 'z' WHERE body LIKE '1%'");
            return temporaryFiles();
          });
        expect(await filesDuringUpdate()).toEqual([]);
        await reopenSqlite(db.dataSource);
        expect(await filesDuringUpdate()).toEqual([]);
        expect(await queryRows<{ temp_store: number }>(db.manager, 'PRAGMA temp_store')).toEqual([{ temp_store: 2 }]);
      });
    });

    describe('checkpoints', () => {
      const checkpointEvery = () => queryRows<{ wal_autocheckpoint: number }>(db.manager, 'PRAGMA wal_autocheckpoint');

      it(`copy the log into the file every ${SQLITE_CHECKPOINT_PAGES} pages, not SQLite's 1,000, also after the connection is reopened`, async () => {
        expect(await checkpointEvery()).toEqual([{ wal_autocheckpoint: SQLITE_CHECKPOINT_PAGES }]);
        await reopenSqlite(db.dataSource);
        expect(await checkpointEvery()).toEqual([{ wal_autocheckpoint: SQLITE_CHECKPOINT_PAGES }]);
      });
    });

    describe('page cache', () => {
      const cacheSize = () => queryRows<{ cache_size: number }>(db.manager, 'PRAGMA cache_size');

      it(`is SQLite's own ${SQLITE_CACHE_KIB} KiB, not the 16,000 better-sqlite3 compiles in, also after the connection is reopened`, async () => {
        expect(await cacheSize()).toEqual([{ cache_size: -SQLITE_CACHE_KIB }]);
        await reopenSqlite(db.dataSource);
        expect(await cacheSize()).toEqual([{ cache_size: -SQLITE_CACHE_KIB }]);
      });
    });
  }

  describe('an INSERT of one row (Statements.insertOne)', () => {
    if (kind.name === 'sqlite') {
      it('answers the new row\'s rowid, and nothing when ON CONFLICT DO NOTHING stored nothing', async () => {
        const ids = await db.write(async (m) => {
          const sql = statementsOf(m);
          await sql.run('CREATE UNIQUE INDEX notes_body ON notes (body)');
          const insert = 'INSERT INTO notes (body) VALUES (?) ON CONFLICT (body) DO NOTHING';
          return [await sql.insertOne(insert, ['first']), await sql.insertOne(insert, ['second']), await sql.insertOne(insert, ['first'])];
        });
        const rowids = await queryRows<{ rowid: number; body: string }>(db.manager, 'SELECT rowid, body FROM notes ORDER BY rowid');
        expect(rowids.map((row) => row.body)).toEqual(['first', 'second']);
        expect(ids).toEqual([rowids[0].rowid, rowids[1].rowid, undefined]);
      });
    } else {
      it('is refused on PostgreSQL, which has no rowid, with a message that says so', async () => {
        const error = await db.write((m) => statementsOf(m).insertOne('INSERT INTO notes (body) VALUES (?)', ['x'])).catch((e: unknown) => e);
        expect((error as Error).message).toMatch(/SQLite's.*RETURNING/);
        expect(await committedNotes('postgres', testDb.url)).toEqual([]);
      });
    }
  });

  it('stores a boolean and an undefined parameter as the database takes them (SQLite: 1 and NULL), beside plain ones', async () => {
    const rows = await db.write(async (m) => {
      const sql = statementsOf(m);
      await sql.run('INSERT INTO notes (body) VALUES (?)', ['plain']);
      await sql.run(`INSERT INTO notes (body) VALUES (CASE WHEN ? THEN 'yes' ELSE 'no' END)`, [true]);
      await sql.run('INSERT INTO notes (body) VALUES (COALESCE(?, ?))', [undefined, 'was undefined']);
      return sql.rows<{ body: string }>('SELECT body FROM notes ORDER BY body');
    });
    expect(rows.map((row) => row.body)).toEqual(['plain', 'was undefined', 'yes']);
  });

  /** PostgreSQL: counts the writes to the socket of the transaction's session, until `stop`. */
  function countWrites(m: EntityManager): { count: number; stop(): void } {
    const session = (m.queryRunner as unknown as { databaseConnection: { connection: { stream: Record<string, unknown> } } }).databaseConnection;
    const stream = session.connection.stream as { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
    const { _write: write, _writev: writev } = stream;
    const counter = { count: 0, stop: () => Object.assign(stream, { _write: write, _writev: writev }) };
    stream._write = (...args: unknown[]) => (counter.count++, write.apply(stream, args));
    stream._writev = (...args: unknown[]) => (counter.count++, writev.apply(stream, args));
    return counter;
  }

  describe('a queued statement (Statements.queue)', () => {
    const insert = 'INSERT INTO notes (body) VALUES (?)';

    it('is stored with its transaction, in order with the statements around it, and seen by those after it', async () => {
      const seen = await db.write(async (m) => {
        const sql = statementsOf(m);
        await sql.queue(insert, ['first, queued']);
        await sql.run(insert, ['second, awaited']);
        await sql.queue(insert, ['third, queued']);
        return (await sql.rows<{ body: string }>('SELECT body FROM notes')).map((row) => row.body);
      });
      expect(seen).toEqual(['first, queued', 'second, awaited', 'third, queued']);
      expect(await committedNotes(kind.name, testDb.url)).toEqual(['first, queued', 'second, awaited', 'third, queued']);
    });

    it('that fails fails its whole transaction with its own error, and the same connection takes the next write', async () => {
      const failing = db.write(async (m) => {
        const sql = statementsOf(m);
        await sql.run(insert, ['awaited before it']);
        await sql.queue(insert, [null]); // NOT NULL
        await sql.queue(insert, ['queued after it']);
      });
      // Matched on its message: better-sqlite3's native code throws the SqliteError of the first test file that
      // loaded it in this worker, which is no Error of this file's realm, so `toThrow` would not recognise it.
      await expect(failing).rejects.toMatchObject({ message: expect.stringMatching(/NOT NULL|null value/) });
      await expect(failing).rejects.not.toBeInstanceOf(StorageUnavailableError);
      await db.write(note('the next write'));
      expect(await committedNotes(kind.name, testDb.url)).toEqual(['the next write']);
    });

    if (kind.name === 'postgres') {
      it('on PostgreSQL is sent without waiting for its answer; the commit waits for it', async () => {
        let wentOn = false;
        const written = db.write(async (m) => {
          const sql = statementsOf(m);
          await sql.queue('SELECT pg_sleep(1.5)');
          wentOn = true;
          await sql.queue(insert, ['after the sleep']);
        });
        const sleeping = () =>
          withPostgresClient(testDb.url, async (c) =>
            Number((await c.query<{ n: string }>(`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(1.5)' AND state = 'active'`)).rows[0]?.n),
          );
        while ((await sleeping()) === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(wentOn).toBe(true); // while the server still sleeps
        await written;
        expect(await committedNotes(kind.name, testDb.url)).toEqual(['after the sleep']);
      });

      it('on PostgreSQL leaves with the statements sent in the same tick, in one write to the socket', async () => {
        const stored = await db.write(async (m) => {
          const writes = countWrites(m);
          try {
            const sql = statementsOf(m);
            const queued = [sql.queue(insert, ['one']), sql.queue(insert, ['two']), sql.queue(insert, ['three'])];
            const counted = sql.rows<{ n: string }>('SELECT COUNT(*) AS n FROM notes');
            await Promise.all(queued);
            const [{ n }] = await counted;
            return { writes: writes.count, n: Number(n) };
          } finally {
            writes.stop();
          }
        });
        expect(stored).toEqual({ writes: 1, n: 3 });
        expect(await committedNotes(kind.name, testDb.url)).toEqual(['one', 'three', 'two']);
      });

      it('as the last of its transaction (queueRows), on PostgreSQL leaves with the COMMIT in one write, its rows read once both are answered', async () => {
        // Counted until the COMMIT is answered: the work returns before it is sent.
        const { rows, writes } = await db.write(async (m) => {
          const writes = countWrites(m);
          return { rows: statementsOf(m).queueRows<{ body: string }>(`${insert} RETURNING body`, ['returned']), writes };
        });
        writes.stop();
        expect({ writes: writes.count, rows: await rows }).toEqual({ writes: 1, rows: [{ body: 'returned' }] });
        expect(await committedNotes(kind.name, testDb.url)).toEqual(['returned']);
      });

      it('as the last of its transaction (queueRows), on PostgreSQL fails the commit when it fails, and its rows with the same error', async () => {
        let rows: Promise<unknown> | undefined;
        const failing = db.write(async (m) => {
          await statementsOf(m).queue(insert, ['queued before it']);
          rows = statementsOf(m).queueRows(`${insert} RETURNING body`, [null]); // NOT NULL
        });
        await expect(failing).rejects.toMatchObject({ message: expect.stringMatching(/null value/) });
        await expect(rows).rejects.toMatchObject({ message: expect.stringMatching(/null value/) });
        expect(await committedNotes(kind.name, testDb.url)).toEqual([]);
      });

      it('on PostgreSQL goes out on a pipelined session (pg 8 deprecates queuing outside pipeline mode, pg 9 refuses it)', async () => {
        const pipelined = await db.write(async (m) => {
          const sql = statementsOf(m);
          await sql.queue(insert, ['queued']);
          await sql.run(insert, ['awaited']);
          return (m.queryRunner as unknown as { databaseConnection: { pipeline?: boolean } }).databaseConnection.pipeline;
        });
        expect(pipelined).toBe(true);
      });
    }
  });

  describe('a COMMIT that fails', () => {
    // A deferred foreign key is checked only at COMMIT. SQLite then keeps the transaction open; PostgreSQL ends it.
    const schema = [
      'CREATE TABLE parents (id INTEGER PRIMARY KEY)',
      'CREATE TABLE children (parent_id INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)',
    ];

    it('is rolled back, and the same connection takes the next write', async () => {
      for (const sql of schema) await db.write((m) => queryRows(m, sql));
      const orphan = db.write(async (m) => {
        await note('lost with its transaction')(m);
        await queryRows(m, 'INSERT INTO children (parent_id) VALUES (?)', [42]); // checked only at COMMIT
      });
      await expect(orphan).rejects.toMatchObject(foreignKeyRefusal);
      await expect(orphan).rejects.not.toBeInstanceOf(StorageUnavailableError); // a constraint is the caller's fault, not the disk's
      if (kind.name === 'sqlite') expect(sqliteConnection(db).inTransaction).toBe(false);

      await db.write(note('after the failed commit'), { durable: true });
      await db.write(note('and another'));
      expect(await committedNotes(kind.name, testDb.url)).toEqual(['after the failed commit', 'and another']);
      expect(db.health.current).toBeUndefined();
    });
  });

  describe("what a write does through TypeORM's manager (the admin side's saves, which open a transaction of their own)", () => {
    const inner = (body: string) => (m: EntityManager) => m.transaction((t) => note(body)(t));

    it('joins the write\'s transaction: committed with it, and rolled back with it', async () => {
      await db.write(inner('committed with its write'));
      const failed = db.write(async (m) => {
        await inner('rolled back with its write')(m);
        throw new Error('the write fails after its save');
      });
      await expect(failed).rejects.toThrow('the write fails after its save');
      await db.write(note('after the failed write'));
      expect(await committedNotes(kind.name, testDb.url)).toEqual(['after the failed write', 'committed with its write']);
    });
  });

  describe('a patient write (the outcome of a request already answered)', () => {
    // As node-postgres reports a server that is down: what a restart looks like from the engine.
    const serverDown = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));

    it('is tried again while the database refuses writes, and goes through once it takes them', async () => {
      let tries = 0;
      const written = await db.patiently(() => db.write(++tries <= 2 ? serverDown : note('kept')).then(() => tries), 5_000);
      expect({ written, notes: await committedNotes(kind.name, testDb.url) }).toEqual({ written: 3, notes: ['kept'] });
      expect(db.health.failuresByKind.get('unreachable')).toBe(2);
    });

    it('gives up with the refusal once its time is up', async () => {
      let tries = 0;
      const started = Date.now();
      const refused = db.patiently(() => (tries++, db.write(serverDown)), 300);
      await expect(refused).rejects.toMatchObject({ code: 'storage_unavailable', kind: 'unreachable' });
      expect({ triedAgain: tries > 1, gaveUpInTime: Date.now() - started < 1_000 }).toEqual({ triedAgain: true, gaveUpInTime: true });
    });

    it("is not tried again after an error that is not the storage's", async () => {
      let tries = 0;
      const failing = db.patiently(() => (tries++, db.write((m) => queryRows(m, 'INSERT INTO no_such_table (body) VALUES (?)', ['x']))), 5_000);
      await expect(failing).rejects.not.toBeInstanceOf(StorageUnavailableError);
      expect(tries).toBe(1);
    });
  });

  if (kind.name === 'sqlite') {
    describe('a write SQLite refuses for want of space (SQLITE_FULL)', () => {
      const big = 'x'.repeat(3_000);

      /** Caps the file at its current size: the next page it needs is refused, as on a full disk. */
      async function fillTheDisk(): Promise<void> {
        const [{ page_count: pages }] = await db.dataSource.query('PRAGMA page_count');
        await db.dataSource.query(`PRAGMA max_page_count = ${Number(pages)}`);
      }

      const fill = (label: string) => async (m: Parameters<Parameters<Database['write']>[0]>[0]) => {
        for (let i = 0; i < 20; i++) await note(`${label} ${i} ${big}`)(m);
      };

      it('is refused as storage_unavailable (503, disk_full), and writes go through once there is space', async () => {
        await fillTheDisk();
        for (const attempt of ['first', 'second']) {
          const refused = db.write(fill(attempt), { durable: true });
          await expect(refused).rejects.toBeInstanceOf(StorageUnavailableError);
          await expect(refused).rejects.toMatchObject({ code: 'storage_unavailable', kind: 'disk_full', status: 503 });
          expect(sqliteConnection(db).inTransaction).toBe(false);
        }
        expect(db.health.current).toMatchObject({ kind: 'disk_full' });

        await db.dataSource.query('PRAGMA max_page_count = 1073741823');
        await db.write(note('space again'), { durable: true });
        await db.write(note('and bookkeeping'));
        expect(await committedNotes('sqlite', testDb.url)).toEqual(['and bookkeeping', 'space again']);
        expect(await faultEnds(db)).toBe(true);
        expect(db.health.failuresByKind.get('disk_full')).toBe(2);
      });

      it('leaves no transaction behind when the next COMMIT fails too', async () => {
        // SQLite rolled the refused write back by itself, so TypeORM's own ROLLBACK failed and its
        // count of open transactions stayed at one: the next transaction became a SAVEPOINT, and a
        // COMMIT failing on it (SQLITE_FULL on a real disk; here a deferred foreign key) used to leave
        // the connection inside a transaction for good ("Safety level may not be changed inside a transaction").
        await db.write((m) => queryRows(m, 'CREATE TABLE parents (id INTEGER PRIMARY KEY)'));
        await db.write((m) => queryRows(m, 'CREATE TABLE children (parent_id INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)'));
        await fillTheDisk();
        await expect(db.write(fill('refused'), { durable: true })).rejects.toMatchObject({ kind: 'disk_full' });
        await db.dataSource.query('PRAGMA max_page_count = 1073741823');

        const failedCommit = db.write((m) => queryRows(m, 'INSERT INTO children (parent_id) VALUES (?)', [42]));
        await expect(failedCommit).rejects.toMatchObject(foreignKeyRefusal);
        expect(sqliteConnection(db).inTransaction).toBe(false);

        await db.write(note('durable'), { durable: true });
        await db.write(note('bookkeeping'));
        expect(await committedNotes('sqlite', testDb.url)).toEqual(['bookkeeping', 'durable']);
      });
    });

    describe('a connection that refuses writes (SQLITE_READONLY)', () => {
      it('is reopened, so a file that is writable again is written again', async () => {
        await db.dataSource.query('PRAGMA query_only = ON'); // this connection now refuses writes, as one opened on a read-only file does
        await expect(db.write(note('refused'))).rejects.toMatchObject({ code: 'storage_unavailable', kind: 'read_only' });
        await db.write(note('written'));
        expect(await committedNotes('sqlite', testDb.url)).toEqual(['written']);
        expect(await faultEnds(db)).toBe(true);
      });
    });
  }

  if (kind.name === 'postgres') {
    describe('a session that refuses writes (read-only)', () => {
      const database = () => new URL(testDb.url).pathname.slice(1);
      // From the server's own database: a session on the read-only one could not undo it.
      const admin = (sql: string) => withPostgresClient(postgresUrlForTests, (c) => c.query(sql));

      it('is replaced by a new one once the database takes writes again', async () => {
        await admin(`ALTER DATABASE ${database()} SET default_transaction_read_only = on`);
        await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database()}' AND pid <> pg_backend_pid()`);
        const refused = db.write(note('refused'));
        await expect(refused).rejects.toMatchObject({ code: 'storage_unavailable' });
        await expect(db.write(note('refused by a read-only session'))).rejects.toMatchObject({ kind: 'read_only' });

        await admin(`ALTER DATABASE ${database()} RESET default_transaction_read_only`);
        // No backend is terminated this time: the engine must not keep the read-only session it has.
        await db.write(note(`written ${randomUUID()}`));
        expect(await committedNotes('postgres', testDb.url)).toHaveLength(1);
        expect(await faultEnds(db)).toBe(true);
      });
    });
  }
});
