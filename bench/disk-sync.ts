/**
 * How long this machine's disk takes to make a write durable, measured at the
 * start and at the end of a benchmark run: SQLite's durable commits (the
 * engine's intake, the reference server's batches) wait for it, so a slow disk
 * holds back both, and the ratios between them stop meaning what they say.
 *
 * Why: on the shared machines the benchmark runs on, the disk's sync time is
 * usually about a millisecond or less, but after long stretches of benchmarks
 * it was seen throttled (session 68: after some eighty minutes of runs, the
 * engine's COMMITs took 37 ms each on average and up to 764 ms, most of them
 * about 120 ms; the engine did 265 events a second). The load average does
 * not show it; this does.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface DiskSync {
  /** Milliseconds for one write of `bytes` and its fdatasync: median, 90th percentile, longest. */
  p50Ms: number;
  p90Ms: number;
  maxMs: number;
  rounds: number;
  bytes: number;
}

/** A sync of the median slower than this is not this machine's disk as usual. */
export const SLOW_SYNC_MS = 10;

/**
 * `rounds` writes of `bytes` (about what an intake commit adds to SQLite's log) to a new file in `dir` (where the
 * benchmark's databases are made), each followed by fdatasync, timed one by one; the file is removed after.
 */
export function measureDiskSync(dir = tmpdir(), rounds = 20, bytes = 65_536): DiskSync {
  const folder = mkdtempSync(join(dir, 'bench-disk-sync-'));
  const times: number[] = [];
  try {
    const fd = openSync(join(folder, 'probe'), 'w');
    try {
      const block = Buffer.alloc(bytes, 0x5a);
      for (let i = 0; i < rounds; i++) {
        const started = performance.now();
        writeSync(fd, block, 0, bytes, i * bytes);
        fdatasyncSync(fd);
        times.push(performance.now() - started);
      }
    } finally {
      closeSync(fd);
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  return { p50Ms: at(0.5), p90Ms: at(0.9), maxMs: times[times.length - 1], rounds, bytes };
}

/** A note for the results when the disk's median sync at the start or the end was slow; undefined otherwise. */
export function diskWarning(atStart: DiskSync | undefined, atEnd: DiskSync | undefined): string | undefined {
  const slow = [atStart, atEnd].some((d) => d !== undefined && d.p50Ms > SLOW_SYNC_MS);
  if (!slow) return undefined;
  const said = (d: DiskSync | undefined) => (d === undefined ? 'not measured' : `${d.p50Ms.toFixed(1)} ms (longest ${d.maxMs.toFixed(1)})`);
  return `the disk was slow: a ${Math.round((atStart ?? atEnd)!.bytes / 1024)} KiB write and its fdatasync took ${said(atStart)} at the start and ${said(atEnd)} at the end (usually about a millisecond or less); SQLite's durable commits wait for it, the engine's and the reference's alike, so these figures and their ratios say more about the disk than about either`;
}
