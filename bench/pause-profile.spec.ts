/**
 * bench/pause-profile.cjs, as the benchmark uses it: preloaded (`--require`)
 * into a real node process that blocks its event loop, collects its garbage
 * and commits to a real SQLite file, which then exits and leaves its summary.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HOOK = join(process.cwd(), 'bench', 'pause-profile.cjs');
const DRIVER = join(process.cwd(), 'node_modules', 'better-sqlite3');

interface Tally {
  count: number;
  totalMs: number;
  maxMs: number;
  long: Array<[number, number]>;
}

interface Summary {
  loopDelayMs: { p50: number; p99: number; p999: number; max: number };
  stalls: Array<[number, number]>;
  gc: Record<string, Tally>;
  commits: Tally;
}

describe('the pause profile hook', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pause-profile-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lists the stalls of the event loop, the collections and the COMMITs with their times, and writes them as the process exits', () => {
    const script = join(dir, 'work.cjs');
    writeFileSync(script, `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(${JSON.stringify(join(dir, 'work.sqlite'))});
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      const begin = db.prepare('BEGIN'), commit = db.prepare('COMMIT'), insert = db.prepare('INSERT INTO t (v) VALUES (?)');
      for (let i = 0; i < 3; i++) { begin.run(); insert.run('a'); commit.run(); }
      setTimeout(() => {
        const from = performance.now();
        console.log(JSON.stringify({ blockedFrom: from }));
        while (performance.now() < from + 60); // the event loop blocked for 60 ms
        gc();
        setTimeout(() => {}, 20);
      }, 20);
    `);
    const child = spawnSync(process.execPath, ['--expose-gc', '--require', HOOK, script], { env: { ...process.env, PAUSE_PROFILE_DIR: dir }, encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const summary = JSON.parse(readFileSync(join(dir, `pause-profile-${child.pid}.json`), 'utf8')) as Summary;
    expect(summary.commits.count).toBe(3);
    expect(summary.commits.totalMs).toBeGreaterThan(0);
    expect(summary.gc['mark-compact']?.count).toBeGreaterThanOrEqual(1);
    // The stall that spans the middle of the block (a busy machine may add others, such as the SQLite file's syncs).
    const { blockedFrom } = JSON.parse(child.stdout) as { blockedFrom: number };
    const blocked = summary.stalls.filter(([at, late]) => at <= blockedFrom + 30 && at + late >= blockedFrom + 30);
    expect(blocked).toHaveLength(1);
    expect(blocked[0]![1]).toBeGreaterThanOrEqual(50);
    expect(summary.loopDelayMs.max).toBeGreaterThanOrEqual(50);
    const text = readFileSync(join(dir, `pause-profile-${child.pid}.txt`), 'utf8');
    expect(text).toMatch(/^SQLite COMMIT\s+3\s+\d+ ms/m);
    expect(text).toContain(`${blocked[0]![0]}:${blocked[0]![1]}`);
  });
});
