/**
 * bench/wal-census.cjs, as the benchmark uses it: preloaded (`--require`) into
 * a real node process that writes to a real SQLite file in WAL mode, then its
 * report read by the same file run as a command.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CENSUS = join(process.cwd(), 'bench', 'wal-census.cjs');
const DRIVER = join(process.cwd(), 'node_modules', 'better-sqlite3');

interface Census {
  events: number;
  transactions: number;
  frames: number;
  trees: Array<{ tree: string; frames: number; perEvent: number }>;
  kinds: Array<{ kind: string; transactions: number; framesEach: number; trees: Array<{ tree: string; each: number }> }>;
}

/** Runs `script` under the hook, its census beginning 1.5 s after the start and copied at 3 s; resolves with its exit code. */
function runUnderHook(dir: string, script: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', CENSUS, script], {
      env: { ...process.env, WAL_CENSUS_DIR: dir, WAL_CENSUS_FROM_MS: '1500', WAL_CENSUS_TO_MS: '3000' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', resolve);
  });
}

describe('the WAL census', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'wal-census-test-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("counts, from the first mark on, each transaction's frames by the b-tree they belong to", async () => {
    const script = join(dir, 'work.cjs');
    // The work, in a process of its own: rows written before the census begins (not counted), then between its two
    // marks twenty transactions of ten events with random keys (the table and its index) and five of one row in
    // another table, then it waits for the copy. Each waits on the file the hook writes, not on a clock.
    writeFileSync(script, `
      const { existsSync } = require('node:fs');
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(${JSON.stringify(join(dir, 'work.sqlite'))});
      db.pragma('journal_mode = WAL');
      db.pragma('wal_autocheckpoint = 1');
      db.exec('CREATE TABLE events (seq INTEGER PRIMARY KEY, k TEXT, v TEXT); CREATE INDEX idx_events_k ON events (k);' +
              'CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT)');
      const insertEvent = db.prepare('INSERT INTO events (k, v) VALUES (?, ?)');
      const insertOther = db.prepare('INSERT INTO other (v) VALUES (?)');
      const events = db.transaction((n) => { for (let i = 0; i < n; i++) insertEvent.run(Math.random().toString(36).repeat(4), 'x'.repeat(300)); });
      const other = db.transaction(() => insertOther.run('y'));
      for (let i = 0; i < 50; i++) events(10);
      const when = (file, then) => { const poll = setInterval(() => { if (existsSync(${JSON.stringify(dir)} + '/' + file)) { clearInterval(poll); then(); } }, 20); };
      when('wal-census.started.json', () => {
        for (let i = 0; i < 20; i++) events(10);
        for (let i = 0; i < 5; i++) other();
        when('wal-census.json', () => db.close());
      });
    `);

    expect(await runUnderHook(dir, script)).toBe(0);
    const printed = spawnSync(process.execPath, [CENSUS, 'report', dir], { encoding: 'utf8' });
    expect(printed.status).toBe(0);
    expect(printed.stdout).toMatch(/^200 events stored, 25 transactions, \d+ frames: [\d.]+ frames an event$/m);
    const census = JSON.parse(readFileSync(join(dir, 'wal-census-report.json'), 'utf8')) as Census;

    // Only what was written between the marks, though a checkpoint after every commit was asked for (the hook turned them off: a checkpoint starts the log over).
    expect(census.events).toBe(200);
    expect(census.transactions).toBe(25);
    const kinds = new Map(census.kinds.map((k) => [k.kind, k]));
    expect([...kinds.keys()].sort()).toEqual(['events', 'other']);
    expect(kinds.get('events')!.transactions).toBe(20);
    expect(kinds.get('other')!.transactions).toBe(5);
    // Ten 300-byte rows a transaction fill about one table page; ten random keys land on several pages of the index.
    const eventsTrees = new Map(kinds.get('events')!.trees.map((t) => [t.tree, t.each]));
    expect(eventsTrees.get('events')).toBeGreaterThanOrEqual(1);
    expect(eventsTrees.get('idx_events_k')).toBeGreaterThan(1);
    expect(kinds.get('other')!.trees.map((t) => t.tree)).toContain('other');
    expect(kinds.get('other')!.trees.map((t) => t.tree)).not.toContain('idx_events_k');
    // The b-trees' frames add up to all the frames counted, and per event to the frames of the whole.
    const byTree = census.trees.reduce((sum, t) => sum + t.frames, 0);
    expect(byTree).toBe(census.frames);
    expect(census.trees.find((t) => t.tree === 'idx_events_k')!.perEvent).toBeCloseTo(census.trees.find((t) => t.tree === 'idx_events_k')!.frames / 200, 6);
  }, 30_000);

  it('leaves the process running when it cannot make its copy, and says why beside it', async () => {
    // The copy's name taken by a folder: copying the database there fails.
    mkdirSync(join(dir, 'wal-census.sqlite'));
    const script = join(dir, 'work.cjs');
    writeFileSync(script, `
      const { existsSync } = require('node:fs');
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(${JSON.stringify(join(dir, 'work.sqlite'))});
      db.pragma('journal_mode = WAL');
      db.pragma('wal_autocheckpoint = 1');
      db.exec('CREATE TABLE t (v TEXT)');
      const poll = setInterval(() => {
        db.prepare('INSERT INTO t (v) VALUES (?)').run('x');
        if (existsSync(${JSON.stringify(join(dir, 'wal-census.error.txt'))})) { clearInterval(poll); db.close(); }
      }, 20);
    `);

    expect(await runUnderHook(dir, script)).toBe(0);
    expect(readFileSync(join(dir, 'wal-census.error.txt'), 'utf8')).toMatch(/^wal-census: Error: EISDIR/);
    expect(existsSync(join(dir, 'wal-census.json'))).toBe(false);
  }, 30_000);

  it('says how it is used when there is no copy to read', () => {
    const printed = spawnSync(process.execPath, [CENSUS, 'report', dir], { encoding: 'utf8' });
    expect(printed.status).toBe(2);
    expect(printed.stderr).toContain('usage: node bench/wal-census.cjs report [DIR]');
  });
});
