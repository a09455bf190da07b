/**
 * The benchmark's figures: one object collected during the run, printed as a
 * short summary for people and written as JSON for tools and for comparing runs.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import type { Paint } from '../src/cli/cli-output.js';
import type { EndToEndFigures } from './bench-e2e.js';
import { describeLayout } from './bench-engine.js';
import type { IntakeFigures } from './bench-intake.js';
import type { LatencySummary } from './bench-load.js';
import type { BenchOptions } from './bench-options.js';
import type { MatchingBenchmark } from './bench-matching.js';

export interface BenchResults {
  generatedAt: string;
  /** The commit measured, `-dirty` when tracked files had changes; the engine changes, so figures need it. */
  revision: string;
  machine: {
    cpus: number; cpuModel: string; memoryMb: number; node: string; platform: string;
    /** 1-minute load averages: other work on the machine skews every figure, so it is recorded. */
    loadAverageAtStart: number; loadAverageAtEnd?: number;
  };
  options: Omit<BenchOptions, 'postgresUrl'> & { postgres: string };
  intake: IntakeFigures[];
  endToEnd: EndToEndFigures[];
  matching: MatchingBenchmark[];
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
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', memoryMb: Math.round(totalmem() / 1_048_576), node: process.version, platform: `${process.platform}-${process.arch}`, loadAverageAtStart: loadavg()[0] },
    options: { ...rest, postgres },
    intake: [],
    endToEnd: [],
    matching: [],
    skipped: [],
    errors: [],
  };
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const ms = (n: number): string => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;

function latencies(l: LatencySummary): string {
  return `p50 ${ms(l.p50)}, p99 ${ms(l.p99)}, p99.9 ${ms(l.p999)}, max ${ms(l.max)}`;
}

function intakeLines(f: IntakeFigures): string[] {
  const failed = Object.entries(f.failed).map(([status, n]) => `${int(n)} × ${status === '0' ? 'no answer' : status}`);
  const memory = `engine RSS ${int(f.engineMemory.rssMb)} MB${f.engineMemory.peakRssMb ? ` (peak ${int(f.engineMemory.peakRssMb)} MB)` : ''}`;
  return [
    `intake (${f.database}, ${describeLayout(f.layout)}, ${f.connections} connections): ${int(f.eventsPerSecond)} events/s, ${latencies(f.latencyMs)}`,
    `    ${int(f.acknowledged)} acknowledged in ${f.seconds.toFixed(1)} s${failed.length ? `, ${failed.join(', ')}` : ''}${f.ranOut ? ' (ran out of prepared events: raise BENCH_EVENTS)' : ''}; ${memory}`,
    `    processed meanwhile: ${int(f.processedDuringRun)} events (${int(f.processedPerSecond)}/s), backlog at the end ${int(f.backlogAtEnd)}`,
    f.layout === 'child'
      ? `    CPU (100 % = one core): engine ${int(f.cpuPercent.engine)} %, load generator + simulator ${int(f.cpuPercent.benchProcess)} %`
      : `    CPU (100 % = one core): engine, load generator and simulator together ${int(f.cpuPercent.benchProcess)} %`,
  ];
}

function endToEndLines(f: EndToEndFigures): string[] {
  // An open loop keeps offering the rate; a lower delivered rate means a queue grew all along.
  const behind = f.throughputPerSecond < f.ratePerSecond * 0.95
    ? [`    the engine fell behind: it delivered ${int(f.throughputPerSecond)}/s of the ${int(f.ratePerSecond)}/s offered, so latency grew with the queue (lower BENCH_E2E_RATE to find the rate it sustains)`]
    : [];
  return [
    `end to end (${f.database}, ${describeLayout(f.layout)}): p50 ${ms(f.latencyMs.p50)}, p99 ${ms(f.latencyMs.p99)} at ${int(f.ratePerSecond)} events/s (max ${ms(f.latencyMs.max)})`,
    `    ${int(f.delivered)}/${int(f.sent)} action requests reached the service (${int(f.throughputPerSecond)}/s)${f.missing ? `, ${int(f.missing)} MISSING` : ''}; webhook answered in p50 ${ms(f.ackLatencyMs.p50)}, p99 ${ms(f.ackLatencyMs.p99)}; ${f.layout === 'child' ? 'engine' : 'whole process'} CPU ${int(f.engineCpuPercent)} % of one core`,
    ...behind,
  ];
}

function matchingLine(m: MatchingBenchmark[]): string {
  const parts = m.map((r) => `${int(r.ruleCount)} rules ${int(r.eventsPerSecond)} ev/s (${r.evaluatedPerEvent.toFixed(1)} evaluated/event)`);
  return `matching: ${parts.join(' | ')}`;
}

/** Run-queue length above half the cores means the engine was sharing them with something else. */
function loadWarning(m: BenchResults['machine']): string | undefined {
  const worst = Math.max(m.loadAverageAtStart, m.loadAverageAtEnd ?? 0);
  if (worst <= m.cpus / 2) return undefined;
  return `the machine was busy (load average ${m.loadAverageAtStart.toFixed(1)} at the start, ${(m.loadAverageAtEnd ?? 0).toFixed(1)} at the end, ${m.cpus} cores): other work shares the CPU and disk, so these figures understate the engine`;
}

export function summaryLines(results: BenchResults, paint: { bold: Paint; yellow: Paint; red: Paint }): string[] {
  const m = results.machine;
  const lines = [paint.bold(`results (${results.revision}; ${m.cpus} × ${m.cpuModel}, ${int(m.memoryMb)} MB, Node ${m.node}):`)];
  const warning = loadWarning(m);
  if (warning) lines.push(paint.yellow(`note: ${warning}`));
  for (const f of results.intake) lines.push(...intakeLines(f));
  for (const f of results.endToEnd) lines.push(...endToEndLines(f));
  if (results.matching.length > 0) lines.push(matchingLine(results.matching));
  for (const s of results.skipped) lines.push(paint.yellow(`skipped: ${s}`));
  for (const e of results.errors) lines.push(paint.red(`could not run ${e.part}: ${e.message}`));
  return lines;
}

export function finishResults(results: BenchResults): void {
  results.machine.loadAverageAtEnd = loadavg()[0];
}

export function writeResults(file: string, results: BenchResults): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
