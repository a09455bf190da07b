/**
 * `npm run bench`'s closed loops taken in turns (bench/bench-interleaved.ts),
 * as a person runs them: the built benchmark starts the reference server, the
 * engine on SQLite and, when the local server answers, on PostgreSQL, all at
 * once, and sends each of them its slices in the order R S P, P S R over real
 * HTTP; the in-memory flow engine runs alone. Read back from the results file
 * it writes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

interface Slice {
  windowStart: number;
  windowEnd: number;
  eventsPerSecond: number;
}

interface Figures {
  system: string;
  kind: string;
  eventsPerSecond: number;
  sent: number;
  duplicateActions: number;
  slices?: Slice[];
}

describe('npm run bench: closed loops in turns', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-interleaved-'));
    execFileSync(process.execPath, ['bench/ensure-build.mjs'], { stdio: 'ignore' });
  }, 300_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (file: string, args: string[]) => {
    const { stderr, status } = spawnSync(process.execPath, ['dist-bench/bench/bench.js', '--quick', '--only', 'e2e', ...args], {
      encoding: 'utf8', timeout: 240_000, env: { ...process.env, BENCH_RESULTS: join(dir, file) }, stdio: ['ignore', 'ignore', 'pipe'],
    });
    expect(status).toBe(0);
    const results = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { closedLoop: Figures[]; errors: unknown[] };
    return { stderr, results };
  };

  it('sends the reference and the engine their slices in turns, forwards then backwards, and adds them up', () => {
    const { stderr, results } = run('slices.json', ['--slices', '2']);
    expect(results.errors).toEqual([]);
    expect(stderr).toMatch(/closed loop e2e \(keep-alive\): reference, sqlite(, postgres)? in turns, 2 slices each/);
    const systems = results.closedLoop.map((f) => f.system);
    // In the order the summary names them, whichever way they ran.
    expect(systems.slice(0, 3)).toEqual(['reference', 'flow', 'sqlite']);
    const together = results.closedLoop.filter((f) => f.system !== 'flow');
    expect(together.length).toBeGreaterThanOrEqual(2);
    for (const f of together) {
      expect(f.slices).toHaveLength(2);
      expect(f.eventsPerSecond).toBeGreaterThan(0);
      expect(f.duplicateActions).toBe(0);
      for (const s of f.slices!) {
        expect(s.windowEnd).toBeGreaterThan(s.windowStart);
        expect(s.eventsPerSecond).toBeGreaterThan(0);
      }
    }
    // The whole figure lies within its slices' own.
    for (const f of together) {
      const rates = f.slices!.map((s) => s.eventsPerSecond);
      expect(f.eventsPerSecond).toBeGreaterThanOrEqual(Math.min(...rates) * 0.99);
      expect(f.eventsPerSecond).toBeLessThanOrEqual(Math.max(...rates) * 1.01);
    }
    // R S (P), then (P) S R: one system at a time, none overlapping the next.
    const windows = [...together.map((f) => f.slices![0]!), ...together.map((f) => f.slices![1]!).reverse()];
    for (let i = 1; i < windows.length; i++) expect(windows[i]!.windowStart).toBeGreaterThanOrEqual(windows[i - 1]!.windowEnd);
    expect(results.closedLoop.find((f) => f.system === 'flow')!.slices).toBeUndefined();
  }, 300_000);

  it('measures each system in turn, a fresh process each, with --slices 1', () => {
    const { stderr, results } = run('in-turn.json', ['--slices', '1']);
    expect(results.errors).toEqual([]);
    expect(results.closedLoop.map((f) => f.system).slice(0, 3)).toEqual(['reference', 'flow', 'sqlite']);
    for (const f of results.closedLoop) {
      expect(f.slices).toBeUndefined();
      expect(f.eventsPerSecond).toBeGreaterThan(0);
    }
    expect(stderr).not.toMatch(/in turns/);
  }, 300_000);

  it('refuses a number of slices that is not a positive number, before starting anything', () => {
    let failure: { status: number; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, ['dist-bench/bench/bench.js', '--slices', '0'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      failure = error as { status: number; stderr: string };
    }
    expect(failure?.status).not.toBe(0);
    expect(failure?.stderr).toMatch(/slices must be a positive number, got "0"/);
  });
});
