/**
 * bench/disk-sync.ts on this machine's real disk: the probe writes, syncs and
 * cleans up after itself; the note names a slow disk and only a slow one.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diskWarning, measureDiskSync, SLOW_SYNC_MS, type DiskSync } from './disk-sync.js';

const sync = (p50Ms: number, maxMs = p50Ms * 2): DiskSync => ({ p50Ms, p90Ms: p50Ms * 1.5, maxMs, rounds: 20, bytes: 65_536 });

describe('the disk sync probe', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'disk-sync-spec-'));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('times each write and its fdatasync, in order of their times, and leaves no file behind', () => {
    const measured = measureDiskSync(dir, 8, 16_384);
    expect(measured.rounds).toBe(8);
    expect(measured.bytes).toBe(16_384);
    expect(measured.p50Ms).toBeGreaterThan(0);
    expect(measured.p50Ms).toBeLessThanOrEqual(measured.p90Ms);
    expect(measured.p90Ms).toBeLessThanOrEqual(measured.maxMs);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('fails with the file system\'s error where it cannot write', () => {
    expect(() => measureDiskSync(join(dir, 'no-such-folder'))).toThrow(/ENOENT/);
  });

  it('notes a disk whose median sync was slow at the start or at the end, with both figures', () => {
    expect(diskWarning(sync(0.8), sync(1.2))).toBeUndefined();
    expect(diskWarning(undefined, undefined)).toBeUndefined();
    expect(diskWarning(sync(0.8), sync(SLOW_SYNC_MS))).toBeUndefined();
    const atEnd = diskWarning(sync(0.8, 1.5), sync(120, 764));
    expect(atEnd).toBe(
      'the disk was slow: a 64 KiB write and its fdatasync took 0.8 ms (longest 1.5) at the start and 120.0 ms (longest 764.0) at the end ' +
        '(usually about a millisecond or less); SQLite\'s durable commits wait for it, the engine\'s and the reference\'s alike, ' +
        'so these figures and their ratios say more about the disk than about either',
    );
    expect(diskWarning(sync(37), undefined)).toMatch(/took 37\.0 ms \(longest 74\.0\) at the start and not measured at the end/);
  });
});
