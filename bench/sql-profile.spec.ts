/**
 * bench/sql-profile.cjs, as the benchmark uses it: preloaded (`--require`)
 * into a real node process that runs statements on a real SQLite file, which
 * then exits and leaves its summary.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HOOK = join(process.cwd(), 'bench', 'sql-profile.cjs');
const DRIVER = join(process.cwd(), 'node_modules', 'better-sqlite3');

interface Summary {
  transactions: Array<{ kind: string; commits: number; statements: number; ms: number; commitMs: number; heldMs: number }>;
  statements: Array<{ text: string; calls: number; ms: number }>;
}

describe('the SQL profile hook', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sql-profile-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('counts statements by their text and transactions by their first statement, and writes both as the process exits', () => {
    const script = join(dir, 'work.cjs');
    writeFileSync(script, `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(${JSON.stringify(join(dir, 'work.sqlite'))});
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      const begin = db.prepare('BEGIN TRANSACTION'), commit = db.prepare('COMMIT'), rollback = db.prepare('ROLLBACK');
      const insert = db.prepare('INSERT INTO t (v) VALUES (?)'), update = db.prepare('UPDATE   t\\n  SET v = ? WHERE id = ?');
      const read = db.prepare('SELECT v FROM t WHERE id = ?');
      for (let i = 0; i < 3; i++) { begin.run(); insert.run('a'); insert.run('b'); read.get(1); commit.run(); }
      begin.run(); update.run('c', 1); commit.run();
      begin.run(); insert.run('never'); rollback.run();
      read.all(2);
    `);
    const child = spawnSync(process.execPath, ['--require', HOOK, script], { env: { ...process.env, SQL_PROFILE_DIR: dir }, encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const summary = JSON.parse(readFileSync(join(dir, `sql-profile-${child.pid}.json`), 'utf8')) as Summary;
    const kinds = Object.fromEntries(summary.transactions.map((t) => [t.kind, { commits: t.commits, statements: t.statements }]));
    expect(kinds).toEqual({
      'INSERT INTO t (v) VALUES (?)': { commits: 3, statements: 9 },
      'UPDATE t SET v = ? WHERE id = ?': { commits: 1, statements: 1 },
    });
    const calls = Object.fromEntries(summary.statements.map((s) => [s.text, s.calls]));
    expect(calls).toMatchObject({ 'BEGIN TRANSACTION': 5, COMMIT: 4, ROLLBACK: 1, 'INSERT INTO t (v) VALUES (?)': 7, 'SELECT v FROM t WHERE id = ?': 4 });
    for (const t of summary.transactions) expect(t.ms).toBeGreaterThanOrEqual(t.commitMs);
    for (const t of summary.transactions) expect(t.heldMs).toBeGreaterThanOrEqual(t.ms);
    const text = readFileSync(join(dir, `sql-profile-${child.pid}.txt`), 'utf8');
    expect(text).toMatch(/^\s+3\s+3\.0(\s+\d+){5}\s+INSERT INTO t \(v\) VALUES \(\?\)$/m);
  });

  it('counts the JavaScript between a transaction\'s statements in its time from BEGIN to COMMIT, not in its statements\' time', () => {
    const script = join(dir, 'work.cjs');
    writeFileSync(script, `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(':memory:');
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      const begin = db.prepare('BEGIN TRANSACTION'), commit = db.prepare('COMMIT'), insert = db.prepare('INSERT INTO t (v) VALUES (?)');
      begin.run(); insert.run('a');
      const until = performance.now() + 50; while (performance.now() < until); // work between the statements
      insert.run('b'); commit.run();
    `);
    const child = spawnSync(process.execPath, ['--require', HOOK, script], { env: { ...process.env, SQL_PROFILE_DIR: dir }, encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const summary = JSON.parse(readFileSync(join(dir, `sql-profile-${child.pid}.json`), 'utf8')) as Summary;
    const [inserted] = summary.transactions;
    expect(inserted).toMatchObject({ kind: 'INSERT INTO t (v) VALUES (?)', commits: 1, statements: 2 });
    expect(inserted!.heldMs).toBeGreaterThanOrEqual(50);
    expect(inserted!.ms).toBeLessThan(25);
  });

  it('makes its folder when it is not there yet, instead of making the process it watches exit', () => {
    const script = join(dir, 'work.cjs');
    writeFileSync(script, `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(':memory:');
      db.prepare('SELECT 1').get();
      setTimeout(() => undefined, 2_300); // past the hook's first write, two seconds in
    `);
    const folder = join(dir, 'not', 'there', 'yet');
    const child = spawnSync(process.execPath, ['--require', HOOK, script], { env: { ...process.env, SQL_PROFILE_DIR: folder }, encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const summary = JSON.parse(readFileSync(join(folder, `sql-profile-${child.pid}.json`), 'utf8')) as Summary;
    expect(summary.statements.map((s) => s.text)).toContain('SELECT 1');
  });
});
