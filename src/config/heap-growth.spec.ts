import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { boundHeapGrowth, ENGINE_NODE_OPTIONS, HEAP_GROWTH_FLAG, heapGrowthSetByUser, youngGenerationNote } from './heap-growth.js';

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
  it('is bounded by the options npm start gives node', () => {
    const { scripts } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.start).toContain(`node ${ENGINE_NODE_OPTIONS.join(' ')} dist/bundle/main.js`);
  });

  it('is at most 8 MB a semi-space in a node started with them, 16 MB without', () => {
    const newSpaceMb = (options: readonly string[]) => {
      const script = `let keep = [];
        for (let i = 0; i < 3e6; i++) { keep.push({ a: i, b: 'x' + i }); if (keep.length > 20000) keep = []; }
        process.stdout.write(String(require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576));`;
      const child = spawnSync(process.execPath, [...options, '-e', script], { encoding: 'utf8', timeout: 30_000 });
      if (child.status !== 0) throw new Error(`workload failed: ${child.stderr}`);
      return Number(child.stdout);
    };
    expect(newSpaceMb(ENGINE_NODE_OPTIONS)).toBeLessThanOrEqual(16);
    expect(newSpaceMb([])).toBeGreaterThan(16);
  });

  it('says at start when node was started without a bound on it', () => {
    expect(youngGenerationNote([])).toMatch(/^node was started without --max-semi-space-size=8 \(npm start passes it\)/);
    expect(youngGenerationNote(['--enable-source-maps', ...ENGINE_NODE_OPTIONS])).toBeUndefined();
    expect(youngGenerationNote(['--max_semi_space_size=32'])).toBeUndefined();
  });
});
