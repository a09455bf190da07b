/**
 * The summary printed at the end of `npm run bench`, and the JSON written
 * beside it (bench-results.ts holds the figures' shape).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname } from 'node:path';
import type { Paint } from '../src/cli/cli-output.js';
import { describeLayout } from './bench-engine.js';
import type { MatchingBenchmark } from './bench-matching.js';
import { replicaLines } from './bench-replicas.js';
import { isEngine } from './bench-systems.js';
import type { BenchResults } from './bench-results.js';
import { backlogLines, closedLoopLines, int, openLoopLines, startupLines } from './bench-tables.js';
import { judgeTargets, LOAD_GENERATOR_BUSY, targetLines } from './bench-targets.js';
import { waitingLines } from './bench-waiting.js';
import { diskWarning, measureDiskSync, type DiskSync } from './disk-sync.js';

function matchingLine(m: MatchingBenchmark[]): string {
  const parts = m.map((r) => `${int(r.ruleCount)} rules ${int(r.eventsPerSecond)} ev/s (${r.evaluatedPerEvent.toFixed(1)} evaluated/event)`);
  return `matching: ${parts.join(' | ')}`;
}

function oneLine(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)} …` : flat;
}

/** Run-queue length above half the cores means the engine was sharing them with something else. */
function loadWarning(m: BenchResults['machine']): string | undefined {
  const worst = Math.max(m.loadAverageAtStart, m.loadAverageAtEnd ?? 0);
  if (worst <= m.cpus / 2) return undefined;
  return `the machine was busy (load average ${m.loadAverageAtStart.toFixed(1)} at the start, ${(m.loadAverageAtEnd ?? 0).toFixed(1)} at the end, ${m.cpus} cores): other work shares the CPU and disk, so these figures understate the engine`;
}

/** Figures the load generator's own process may have capped: a closed loop is only as fast as its client. */
function saturationWarning(results: BenchResults): string | undefined {
  const busy = results.closedLoop.filter((f) => f.benchCpuPercent >= LOAD_GENERATOR_BUSY);
  if (busy.length === 0) return undefined;
  return `the load generator and fake service used ≥ ${LOAD_GENERATOR_BUSY} % of a core in ${busy.length} closed-loop run(s) (${busy.map((f) => `${f.kind} ${f.connectionMode} ${f.system}`).join(', ')}): those figures may be capped by the benchmark, not the system`;
}

export function summaryLines(results: BenchResults, paint: { bold: Paint; yellow: Paint; red: Paint; green: Paint }): string[] {
  const m = results.machine;
  const layout = results.closedLoop.find((f) => isEngine(f.system))?.layout ?? results.options.layout;
  const sync = (d: DiskSync | undefined) => (d === undefined ? '–' : `${d.p50Ms.toFixed(2)} ms`);
  const load = `load average ${m.loadAverageAtStart.toFixed(2)} at the start, ${(m.loadAverageAtEnd ?? 0).toFixed(2)} at the end; disk sync ${sync(m.diskSyncAtStart)} and ${sync(m.diskSyncAtEnd)}`;
  const lines = [paint.bold(`results (${results.revision}; ${m.cpus} × ${m.cpuModel}, ${int(m.memoryMb)} MB, Node ${m.node}; ${describeLayout(layout)}; ${load}):`)];
  for (const warning of [loadWarning(m), diskWarning(m.diskSyncAtStart, m.diskSyncAtEnd), saturationWarning(results)]) if (warning) lines.push(paint.yellow(`note: ${warning}`));
  lines.push(...closedLoopLines(results.closedLoop, results.options.durationS), ...openLoopLines(results.openLoop, results.options.drainLimitS, results.options.openDurationS), ...backlogLines(results.backlog), ...startupLines(results.startup));
  lines.push(...waitingLines(results.waiting));
  lines.push(...replicaLines(results.replicas ?? []));
  if (results.matching.length > 0) lines.push(matchingLine(results.matching));
  for (const s of results.skipped) lines.push(paint.yellow(`skipped: ${s}`));
  // In full above (as it happened) and in the JSON; here its start, on one line.
  for (const e of results.errors) lines.push(paint.red(`could not run ${e.part}: ${oneLine(e.message)}`));
  // A run of --replicas alone measures none of the targets: a table of "not measured" would only hide its own figures.
  if (results.targets.some((t) => t.verdict !== 'not measured')) lines.push('', ...targetLines(results, paint));
  return lines;
}

export function finishResults(results: BenchResults): void {
  results.machine.loadAverageAtEnd = loadavg()[0];
  results.machine.diskSyncAtEnd = measureDiskSync();
  results.targets = judgeTargets(results);
}

export function writeResults(file: string, results: BenchResults): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
