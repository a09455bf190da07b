/**
 * native/wal-coalesce.c on real SQLite files: a commit's log written in a few writes, every commit seen by another
 * connection at once and still there after a kill, a transaction rolled back after spilling frames leaving no
 * trace, and a full disk failing the commit that did not fit (and none before it).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canMakeDiskFaults, SmallDisk } from '../../test/support/storage-faults.js';
import { loadExtensionFrom, loadWalCoalesce, WAL_COALESCE_PATH, walWriteCounts } from './wal-coalesce.js';

interface Statement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
}
interface Connection {
  pragma(sql: string, options?: { simple: boolean }): unknown;
  exec(sql: string): void;
  prepare(sql: string): Statement;
  transaction(fn: () => void): () => void;
  close(): void;
}
const Sqlite = createRequire(import.meta.url)('better-sqlite3') as new (file: string) => Connection;

const SCHEMA = 'CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, k TEXT, v TEXT); CREATE INDEX IF NOT EXISTS t_k ON t (k)';

function open(file: string): Connection {
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(SCHEMA);
  return db;
}

function count(db: Connection): number {
  return (db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n;
}

/** Rows with random keys, so that each lands on its own page of the index, and values of a few hundred bytes. */
function insert(db: Connection, rows: number, round: number): void {
  const statement = db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  for (let i = 0; i < rows; i++) statement.run(`${Math.random().toString(36)}-${round}`, 'v'.repeat(200 + (i % 5) * 300));
}

let dir: string;
beforeAll(() => {
  if (!existsSync(WAL_COALESCE_PATH)) throw new Error(`${WAL_COALESCE_PATH} is missing: npm install (or npm test) builds it`);
  expect(loadWalCoalesce()).toEqual({ inUse: true });
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'wal-coalesce-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the write-ahead log written a commit at a time', () => {
  it('writes a commit of many frames in a few writes instead of two a frame', () => {
    const db = open(join(dir, 'a.sqlite'));
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      const before = walWriteCounts();
      for (let round = 0; round < 20; round++) db.transaction(() => insert(db, 50, round))();
      const after = walWriteCounts();
      const asked = after.asked - before.asked;
      const made = after.made - before.made;
      // 20 commits of about 19 frames each (a header and a page: two writes asked a frame), each written in one piece
      // of some 80 KiB; frame by frame, SQLite would have made every write it asked for.
      expect(asked).toBeGreaterThan(20 * 2 * 10);
      expect(made).toBeLessThanOrEqual(20);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  });

  it("shows every commit to another connection at once, and leaves no trace of a rolled-back transaction's spilled frames", () => {
    const file = join(dir, 'b.sqlite');
    const [a, b] = [open(file), open(file)];
    b.pragma('cache_size = 20'); // b spills pages to the log in the middle of its transactions
    let committed = 0;
    try {
      for (let round = 0; round < 120; round++) {
        const [writer, reader] = round % 2 === 0 ? [a, b] : [b, a];
        const rows = round % 7 === 3 ? 400 : 30;
        const rollBack = round % 5 === 2;
        try {
          writer.transaction(() => {
            insert(writer, rows, round);
            if (rollBack) throw new Error('rolled back');
          })();
          committed += rows;
        } catch (error) {
          if ((error as Error).message !== 'rolled back') throw error;
        }
        expect([round, count(reader)]).toEqual([round, committed]);
      }
      a.pragma('wal_checkpoint(RESTART)');
      a.transaction(() => insert(a, 10, 1_000))();
      expect(count(b)).toBe(committed + 10);
      expect(b.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      a.close();
      b.close();
    }
    const again = new Sqlite(file);
    expect(count(again)).toBe(committed + 10);
    again.close();
  });

  it("never writes a rolled-back transaction's spilled frames over a later commit of another connection", () => {
    const file = join(dir, 'd.sqlite');
    const [a, b] = [open(file), open(file)];
    b.pragma('cache_size = 10');
    let committed = 0;
    try {
      for (let round = 0; round < 10; round++) {
        expect(() =>
          b.transaction(() => {
            insert(b, 300, round); // spills: frames in the log past its end, never committed
            throw new Error('rolled back');
          })(),
        ).toThrow('rolled back');
        // a's commit takes the place in the log where b's frames went, before b touches its log again.
        a.transaction(() => insert(a, 30, round))();
        committed += 30;
        b.transaction(() => insert(b, 5, round))();
        committed += 5;
        expect([round, count(a), count(b)]).toEqual([round, committed, committed]);
      }
      expect(a.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      a.close();
      b.close();
    }
  });

  it('commits a transaction larger than what it holds at once (written as it goes), and the next small one', () => {
    const file = join(dir, 'f.sqlite');
    const [a, b] = [open(file), open(file)];
    try {
      const before = walWriteCounts();
      a.transaction(() => {
        const statement = a.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
        for (let i = 0; i < 4_000; i++) statement.run(`big-${i}`, 'w'.repeat(2_000)); // some 9 MiB of pages
      })();
      const made = walWriteCounts().made - before.made;
      expect(made).toBeGreaterThan(60); // pieces of 124 KiB
      expect(made).toBeLessThan(200);
      a.transaction(() => insert(a, 10, 0))();
      expect([count(b), b.pragma('integrity_check', { simple: true })]).toEqual([4_010, 'ok']);
    } finally {
      a.close();
      b.close();
    }
  });

  it('leaves a database in rollback-journal mode as SQLite writes it', () => {
    const file = join(dir, 'e.sqlite');
    const db = new Sqlite(file);
    try {
      expect(db.pragma('journal_mode = DELETE', { simple: true })).toBe('delete');
      db.exec(SCHEMA);
      const before = walWriteCounts();
      for (let round = 0; round < 5; round++) db.transaction(() => insert(db, 50, round))();
      expect(walWriteCounts().asked).toBe(before.asked); // no log, nothing held
      expect([count(db), db.pragma('integrity_check', { simple: true })]).toEqual([250, 'ok']);
    } finally {
      db.close();
    }
  });

  it('keeps every commit it acknowledged when the process is killed in the middle of writing', async () => {
    const file = join(dir, 'c.sqlite');
    for (let round = 0; round < 8; round++) {
      const acknowledged = await killedWhileWriting(file, 80 + round * 40);
      const db = new Sqlite(file);
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
        const rows = count(db);
        expect(rows).toBeGreaterThanOrEqual(acknowledged);
        expect(rows % 40).toBe(0); // whole commits only
      } finally {
        db.close();
      }
    }
  }, 60_000);
});

/**
 * A child process that loads the extension and commits 40 rows at a time, saying after each commit how many rows
 * it has committed, killed (SIGKILL) `afterMs` into its writing; the count it last said.
 */
async function killedWhileWriting(file: string, afterMs: number): Promise<number> {
  const script = `
    const Sqlite = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
    new Sqlite(':memory:').loadExtension(${JSON.stringify(WAL_COALESCE_PATH)}, 'sqlite3_walcoalesce_init');
    const db = new Sqlite(process.argv[1]);
    db.pragma('journal_mode = WAL'); db.pragma('synchronous = NORMAL'); db.pragma('wal_autocheckpoint = 300');
    db.exec(${JSON.stringify(SCHEMA)});
    const insert = db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
    let n = db.prepare('SELECT COUNT(*) AS n FROM t').get().n;
    process.stdout.write('ready\\n');
    for (;;) {
      db.transaction(() => { for (let i = 0; i < 40; i++) insert.run(Math.random().toString(36), 'v'.repeat(100 + i * 20)); })();
      n += 40;
      process.stdout.write(n + '\\n');
    }`;
  const child = spawn(process.execPath, ['-e', script, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let last = 0;
  let pending = '';
  const ready = new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line === 'ready') resolve();
        else last = Number(line);
      }
    });
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  await ready;
  const started = last;
  await waitFor(() => last > started, 10_000);
  await new Promise((resolve) => setTimeout(resolve, afterMs)); // how long it writes before the kill, not a wait for state
  child.kill('SIGKILL');
  await exited;
  return last;
}

async function waitFor(done: () => boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > until) throw new Error('the child committed nothing');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe(loadExtensionFrom.name, () => {
  it('says why the log is written frame by frame when the extension is missing or is not one', () => {
    expect(loadExtensionFrom(join(dir, 'missing.so'))).toEqual({ inUse: false, reason: `${join(dir, 'missing.so')} is not built (npm install builds it)` });
    const notAnExtension = join(dir, 'text.so');
    writeFileSync(notAnExtension, 'not a shared object');
    const loaded = loadExtensionFrom(notAnExtension);
    expect(loaded.inUse).toBe(false);
    expect(loaded).toMatchObject({ reason: expect.stringContaining(`${notAnExtension} did not load: `) });
  });
});

describe('the write-ahead log written a commit at a time, on a full disk', () => {
  it('fails the commit that does not fit, keeps those before it, and writes again once there is room', async () => {
    if (!(await canMakeDiskFaults('the log written a commit at a time, on a full disk'))) return;
    const disk = await SmallDisk.mount('2m');
    try {
      const db = open(disk.file);
      db.pragma('wal_autocheckpoint = 0'); // the log only grows, and fills the disk
      let committed = 0;
      let refused: Error | undefined;
      for (let round = 0; round < 200 && refused === undefined; round++) {
        try {
          db.transaction(() => insert(db, 20, round))();
          committed += 20;
        } catch (error) {
          refused = error as Error;
        }
      }
      expect((refused as { code?: string } | undefined)?.code).toMatch(/^SQLITE_(FULL|IOERR)/);
      expect(count(db)).toBe(committed);
      await disk.resize('64m');
      db.transaction(() => insert(db, 20, 1_000))();
      expect(count(db)).toBe(committed + 20);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      db.close();
      const again = new Sqlite(disk.file);
      expect(count(again)).toBe(committed + 20);
      again.close();
    } finally {
      await disk.unmount();
    }
  });
});
