/**
 * `npm run bench:pair` (bench/bench-pair.ts) as a person runs it: built into
 * dist-bench/ by bench/ensure-build.mjs, it starts two real engines (here both
 * the bundle `npm start` runs, B with a hook of its own preloaded), each with
 * its own SQLite file and fake service, drives both closed loops at once over
 * real HTTP, and prints each round and the summary; with `--postgres`, each
 * engine on a database of its own on the local PostgreSQL server, dropped
 * afterwards.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { postgresOnly, postgresUrlForTests, withPostgresClient } from './support/databases.js';

const BUILT = 'dist/bundle/main.js';
const SIDE = /([\d,]+) events\/s, ([\d,]+) µs of main thread an event \((\d+) % of a core\)/g;

/** Each round names both engines' events/s, main-thread CPU an event and share of a core, all above zero. */
function expectRounds(lines: string[], rounds: number): string[] {
  const found = lines.filter((line) => line.startsWith('round '));
  expect(found).toHaveLength(rounds);
  for (const round of found) {
    const figures = [...round.matchAll(SIDE)].map((m) => m.slice(1, 4).map((n) => Number(n.replace(/,/g, ''))));
    expect(figures).toHaveLength(2);
    for (const [eventsPerSecond, cpuUs, busy] of figures) {
      expect(eventsPerSecond).toBeGreaterThan(0);
      expect(cpuUs).toBeGreaterThan(0);
      expect(busy).toBeGreaterThan(0);
      expect(busy).toBeLessThanOrEqual(105);
    }
  }
  return found;
}

/** The benchmark's databases on the server (bench-databases.ts names them engine_bench_…). */
const benchDatabases = () =>
  withPostgresClient(postgresUrlForTests, async (c) => (await c.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'engine_bench%'")).rows.map((r) => r.datname));

describe('bench:pair', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-pair-'));
    execFileSync(process.execPath, ['bench/ensure-build.mjs'], { stdio: 'ignore' });
  }, 300_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs two engines at once, each with its own node options, and prints their figures round by round', () => {
    // Loaded by B's node alone: each process that loads it leaves a file named after its pid.
    const hook = join(dir, 'mark.cjs');
    writeFileSync(hook, `require('node:fs').writeFileSync(${JSON.stringify(dir)} + '/loaded-' + process.pid, '');`);
    const out = execFileSync(
      process.execPath,
      ['dist-bench/bench/bench-pair.js', '--a', BUILT, '--b', BUILT, `--b-args=--require ${hook}`, '--rounds', '2', '--seconds', '1', '--warmup', '0', '--connections', '4'],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const lines = out.trimEnd().split('\n');

    expect(readdirSync(dir).filter((name) => name.startsWith('loaded-'))).toHaveLength(1);
    expect(lines.slice(0, 3)).toEqual([`A: ${BUILT}`, `B: ${BUILT} --require ${hook}`, 'end to end (every event matches) on SQLite, 4 keep-alive clients each; warming up for 0 s …']);
    for (const round of expectRounds(lines, 2)) {
      // Each engine's webhook-to-action latency, from its own fake service's arrivals: p50 no more than p99.
      const latencies = [...round.matchAll(/p50 \/ p99 ([\d.,]+) \/ ([\d.,]+) ms/g)].map((m) => [Number(m[1].replace(/,/g, '')), Number(m[2].replace(/,/g, ''))]);
      expect(latencies).toHaveLength(2);
      for (const [p50, p99] of latencies) {
        expect(p50).toBeGreaterThan(0);
        expect(p99).toBeGreaterThanOrEqual(p50);
      }
    }
    expect(lines.at(-1)).toMatch(/^B against A over 2 round\(s\), median \(range\): events\/s [\d.]+× \([\d.]+–[\d.]+×\), main-thread CPU an event [\d.]+× .*, webhook-to-action p50 [\d.]+× .*, p99 [\d.]+× /);
  }, 180_000);

  it('sends each engine webhooks at a fixed rate with --open-rate, and compares their latency at that load', () => {
    const out = execFileSync(
      process.execPath,
      ['dist-bench/bench/bench-pair.js', '--open-rate', '300', '--rounds', '1', '--seconds', '2', '--warmup', '1'],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const lines = out.trimEnd().split('\n');
    expect(lines[2]).toBe('open loop, end to end (every event matches) on SQLite, 300 webhooks a second each; warming up for 1 s …');
    const [round] = expectRounds(lines, 1);
    // Each engine kept up with 300 a second: its actions delivered at about that rate (first send to last arrival).
    for (const m of round.matchAll(SIDE)) expect(Number(m[1].replace(/,/g, ''))).toBeGreaterThan(150);
    const latencies = [...round.matchAll(/p50 \/ p99 ([\d.,]+) \/ ([\d.,]+) ms/g)];
    expect(latencies).toHaveLength(2);
    expect(lines.at(-1)).toMatch(/^B against A over 1 round\(s\), .*, webhook-to-action p50 [\d.]+× .*, p99 [\d.]+× /);
  }, 180_000);

  it('runs the two engines on PostgreSQL with --postgres, each on a database of its own, dropped afterwards', async () => {
    if (!(await postgresOnly('bench:pair --postgres'))) return;
    const out = execFileSync(
      process.execPath,
      ['dist-bench/bench/bench-pair.js', '--postgres', '--intake', '--rounds', '1', '--seconds', '1', '--warmup', '0', '--connections', '4'],
      { encoding: 'utf8', timeout: 120_000, env: { ...process.env, BENCH_POSTGRES_URL: postgresUrlForTests } },
    );
    const lines = out.trimEnd().split('\n');
    expect(lines[2]).toBe('intake (no event matches) on PostgreSQL, 4 keep-alive clients each; warming up for 0 s …');
    expectRounds(lines, 1);
    expect(lines.at(-1)).toMatch(/^B against A over 1 round\(s\), median \(range\): events\/s [\d.]+× /);
    const named = lines.slice(0, 2).map((line) => /\(PostgreSQL database (engine_bench_\w+)\)$/.exec(line)?.[1]);
    expect(named).toEqual([expect.any(String), expect.any(String)]);
    expect(named[0]).not.toBe(named[1]);
    const left = await benchDatabases();
    expect(named.filter((name) => left.includes(name!))).toEqual([]);
  }, 180_000);
});
