/**
 * The benchmark's figures: one object collected during the run, printed as a
 * short summary for people (bench-report.ts) and written as JSON for tools and
 * for comparing runs.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import type { BacklogFigures } from './bench-backlog.js';
import type { ClosedLoopFigures } from './bench-closed.js';
import type { OpenLoopFigures } from './bench-e2e.js';
import type { BenchOptions } from './bench-options.js';
import type { MatchingBenchmark } from './bench-matching.js';
import type { ReplicaFigures } from './bench-replicas.js';
import type { StartupFigures } from './bench-startup.js';
import type { WaitingFigures } from './bench-waiting.js';
import { measureDiskSync, type DiskSync } from './disk-sync.js';

export interface TargetVerdict {
  target: string;
  figure: string;
  verdict: 'met' | 'not met' | 'not measured';
}

export interface BenchResults {
  generatedAt: string;
  /** The commit measured, `-dirty` when tracked files had changes; the engine changes, so figures need it. */
  revision: string;
  machine: {
    cpus: number; cpuModel: string; memoryMb: number; node: string; platform: string;
    /** 1-minute load averages: other work on the machine skews every figure, so it is recorded. */
    loadAverageAtStart: number; loadAverageAtEnd?: number;
    /** The disk's time to make a write durable, at the start and the end (disk-sync.ts): a throttled disk skews every figure. */
    diskSyncAtStart?: DiskSync; diskSyncAtEnd?: DiskSync;
  };
  options: Omit<BenchOptions, 'postgresUrl'> & { postgres: string };
  closedLoop: ClosedLoopFigures[];
  openLoop: OpenLoopFigures[];
  backlog: BacklogFigures[];
  startup: StartupFigures[];
  /** Executions waiting on a delay (bench-waiting.ts): one, then `--waiting`. */
  waiting: WaitingFigures[];
  matching: MatchingBenchmark[];
  /** `--replicas N`: 1 … N engine processes on one PostgreSQL database (bench-replicas.ts). */
  replicas?: ReplicaFigures[];
  targets: TargetVerdict[];
  /** Parts not run, and why (e.g. no PostgreSQL server answered). */
  skipped: string[];
  /** Parts that could not run; any entry makes the exit status 1. */
  errors: Array<{ part: string; message: string }>;
}

function revision(): string {
  const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') ? '-dirty' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

export function emptyResults(options: BenchOptions): BenchResults {
  const { postgresUrl, ...rest } = options;
  // The URL may carry a password; its host is enough to say which server it was.
  const postgres = options.postgresDisabled || postgresUrl === undefined ? 'off' : new URL(postgresUrl).host;
  return {
    generatedAt: new Date().toISOString(),
    revision: revision(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', memoryMb: Math.round(totalmem() / 1_048_576), node: process.version, platform: `${process.platform}-${process.arch}`, loadAverageAtStart: loadavg()[0], diskSyncAtStart: measureDiskSync() },
    options: { ...rest, postgres },
    closedLoop: [],
    openLoop: [],
    backlog: [],
    startup: [],
    waiting: [],
    matching: [],
    targets: [],
    skipped: [],
    errors: [],
  };
}
