import { spawnSync } from 'node:child_process';
import { boundHeapGrowth, engineNodeOptions, HEAP_GROWTH_FLAG, heapGrowthSetByUser, youngGenerationNote } from './heap-growth.js';

/**
 * A process that keeps some live heap and promotes garbage into the old space (a ring of objects replaced while
 * they survive young collections, as the objects of events in flight do), with `flag` set at run time as the
 * engine sets it; prints the highest heapUsed it saw, in MB.
 */
const WORKLOAD = `
  const flag = process.argv[1];
  if (flag) require('node:v8').setFlagsFromString(flag);
  const live = (globalThis.live = []);
  for (let i = 0; i < 150000; i++) live.push({ i, s: 'x' + i, a: [i, i + 1] });
  const ring = new Array(50000);
  let peak = 0;
  for (let r = 0; r < 40; r++) {
    for (let i = 0; i < ring.length; i++) ring[i] = { r, i, s: 'y' + i + r, a: [r, i] };
    peak = Math.max(peak, process.memoryUsage().heapUsed);
  }
  process.stdout.write(String(Math.round(peak / 1e6)));`;

function peakHeapMb(flag: string): number {
  const child = spawnSync(process.execPath, ['-e', WORKLOAD, flag], { encoding: 'utf8', timeout: 30_000 });
  if (child.status !== 0) throw new Error(`workload failed: ${child.stderr}`);
  return Number(child.stdout);
}

describe('heap growth', () => {
  it('bounds how far the old space fills with garbage, set once the process runs', () => {
    const unbounded = peakHeapMb('');
    const bounded = peakHeapMb(HEAP_GROWTH_FLAG);
    // About 160 MB against 75 MB on the development machine.
    expect(bounded).toBeGreaterThan(0);
    expect(bounded).toBeLessThan(unbounded * 0.7);
  });

  it("keeps the operator's own --heap-growing-percent", () => {
    expect(heapGrowthSetByUser(['--heap-growing-percent=60'])).toBe(true);
    expect(heapGrowthSetByUser(['--inspect', '--heap_growing_percent=10'])).toBe(true);
    expect(heapGrowthSetByUser(['--heap-growing-percent', '60'])).toBe(true);
    expect(boundHeapGrowth(['--heap-growing-percent=60'])).toBe(false);
  });

  it('applies to any other start', () => {
    expect(heapGrowthSetByUser([])).toBe(false);
    expect(heapGrowthSetByUser(['--enable-source-maps', '--heap-growing-percentage=5'])).toBe(false);
  });
});

describe('young generation', () => {
  const SQLITE = 'sqlite:./data/engine.sqlite';
  const POSTGRES = 'postgres://engine@db:5432/engine';

  it('is bounded to 8 MB a semi-space on SQLite and 16 MB on PostgreSQL, blank or unset being SQLite', () => {
    expect(engineNodeOptions(SQLITE)).toEqual(['--max-semi-space-size=8']);
    expect(engineNodeOptions('sqlite::memory:')).toEqual(['--max-semi-space-size=8']);
    expect(engineNodeOptions(undefined)).toEqual(['--max-semi-space-size=8']);
    expect(engineNodeOptions('  ')).toEqual(['--max-semi-space-size=8']);
    expect(engineNodeOptions(POSTGRES)).toEqual(['--max-semi-space-size=16']);
    expect(engineNodeOptions(' postgresql://engine@db/engine ')).toEqual(['--max-semi-space-size=16']);
  });

  it('is at most 8 MB a semi-space in a node started with the options for SQLite, 16 MB with those for PostgreSQL', () => {
    const newSpaceMb = (options: readonly string[]) => {
      const script = `let keep = [];
        for (let i = 0; i < 3e6; i++) { keep.push({ a: i, b: 'x' + i }); if (keep.length > 20000) keep = []; }
        process.stdout.write(String(require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576));`;
      const child = spawnSync(process.execPath, [...options, '-e', script], { encoding: 'utf8', timeout: 30_000 });
      if (child.status !== 0) throw new Error(`workload failed: ${child.stderr}`);
      return Number(child.stdout);
    };
    expect(newSpaceMb(engineNodeOptions(SQLITE))).toBeLessThanOrEqual(16);
    const postgres = newSpaceMb(engineNodeOptions(POSTGRES));
    expect(postgres).toBeGreaterThan(16);
    expect(postgres).toBeLessThanOrEqual(32);
  });

  it('says at start when node was started without a bound on it, naming the one for its database', () => {
    expect(youngGenerationNote(SQLITE, [])).toMatch(/^node was started without --max-semi-space-size=8 \(npm start passes it for this database\)/);
    expect(youngGenerationNote(POSTGRES, [])).toMatch(/^node was started without --max-semi-space-size=16 /);
    expect(youngGenerationNote(SQLITE, ['--enable-source-maps', ...engineNodeOptions(SQLITE)])).toBeUndefined();
    expect(youngGenerationNote(POSTGRES, ['--max_semi_space_size=32'])).toBeUndefined();
  });
});
