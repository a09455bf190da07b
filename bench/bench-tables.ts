/**
 * The printed tables: closed loops (one table per load and connection mode,
 * each figure also as a ratio to the reference server of the same run, and the
 * engine's against the in-memory flow engine's),
 * the half-rate open loop, the backlog runs and start-up.
 */
import type { BacklogFigures } from './bench-backlog.js';
import type { ClosedLoopFigures, LoadKind } from './bench-closed.js';
import type { OpenLoopFigures } from './bench-e2e.js';
import type { ConnectionMode } from './bench-load.js';
import type { StartupFigures } from './bench-startup.js';
import { UPDATED_TABLES } from './bench-pgstats.js';
import { isEngine, systemLabel } from './bench-systems.js';

export const int = (n: number): string => Math.round(n).toLocaleString('en-US');
export const ms = (n: number): string => `${n < 10 ? n.toFixed(1) : int(n)} ms`;
export const seconds = (n: number): string => `${n.toFixed(n < 10 ? 2 : 1)} s`;
export const ratio = (n: number): string => `${n.toFixed(2)}×`;
/** One decimal below 100, none above. */
export const decimal = (n: number): string => (n < 100 ? n.toFixed(1) : int(n));

/** First column left-aligned, the others right-aligned, two spaces apart. */
export function table(rows: string[][], indent = '  '): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) => indent + r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ').trimEnd());
}

const KIND_TITLE: Record<LoadKind, string> = {
  e2e: 'end to end (every event matches: one POST /v1/tasks each; events/s = actions arrived while sending)',
  intake: 'intake (no event matches: the rule is evaluated and fails; events/s = webhooks acknowledged)',
};

export function referenceOf(all: ClosedLoopFigures[], kind: LoadKind, mode: ConnectionMode): ClosedLoopFigures | undefined {
  return all.find((f) => f.system === 'reference' && f.kind === kind && f.connectionMode === mode);
}

const CLOSED_HEADER: Record<LoadKind, string[]> = {
  e2e: ['', 'events/s', '× ref', 'e2e p50', 'e2e p99', 'acked/s', 'ack p99', 'left at end', 'drain', 'events/CPU-s', 'peak RSS', 'bench CPU'],
  intake: ['', 'events/s', '× ref', 'ack p50', 'ack p99', 'ack p99.9', 'left at end', 'drain', 'events/CPU-s', 'peak RSS', 'bench CPU'],
};

function closedRow(f: ClosedLoopFigures, reference: ClosedLoopFigures | undefined): string[] {
  const vsReference = reference && reference.eventsPerSecond > 0 ? ratio(f.eventsPerSecond / reference.eventsPerSecond) : '–';
  const middle = f.kind === 'e2e'
    ? [ms(f.e2eLatencyMs?.p50 ?? 0), ms(f.e2eLatencyMs?.p99 ?? 0), int(f.acknowledgedPerSecond), ms(f.ackLatencyMs.p99)]
    : [ms(f.ackLatencyMs.p50), ms(f.ackLatencyMs.p99), ms(f.ackLatencyMs.p999)];
  const drained = f.leftAfterDrain > 0 ? `>${seconds(f.drainSeconds)}` : seconds(f.drainSeconds);
  return [
    systemLabel(f.system), int(f.eventsPerSecond), vsReference, ...middle,
    int(f.backlogAtEnd), drained, int(f.eventsPerCpuSecond), `${int(f.memory.peakRssMb ?? f.memory.rssMb)} MB`, `${int(f.benchCpuPercent)} %`,
  ];
}

/**
 * PostgreSQL: the CPU its backends spent for the engine's database (bench-pgstats.ts BackendCpu), an event handled,
 * and events per CPU-second of the engine and its backends together: on intake most of what an event costs the
 * machine, beside a reference whose SQLite runs in its own process.
 */
export function backendsNote(f: ClosedLoopFigures): string | undefined {
  const handled = f.eventsPerCpuSecond * f.cpuSeconds;
  if (f.databaseCpuSeconds === undefined || f.eventsPerCpuSecondWithDatabase === undefined || handled <= 0) return undefined;
  const us = (f.databaseCpuSeconds * 1e6) / handled;
  return `its backends' CPU (the server's processes serving its database) ${decimal(us)} µs an event; ${int(f.eventsPerCpuSecondWithDatabase)} events per CPU-second of the engine and its backends together`;
}

function closedNotes(f: ClosedLoopFigures): string[] {
  const notes: string[] = [];
  const who = systemLabel(f.system);
  const failed = Object.entries(f.failed).map(([status, n]) => `${int(n)} × ${status === '0' ? 'no answer' : status}`);
  if (failed.length > 0) notes.push(`${who}: ${failed.join(', ')}`);
  if (f.ranOut) notes.push(`${who}: ran out of prepared events (raise --events)`);
  if (f.leftAfterDrain > 0) {
    const meanwhile = f.drainSeconds > 0 ? ` (${int((f.backlogAtEnd - f.leftAfterDrain) / f.drainSeconds)} a second of the ${int(f.backlogAtEnd)} waiting done meanwhile)` : '';
    notes.push(`${who}: ${int(f.leftAfterDrain)} acknowledged events still not done ${seconds(f.drainSeconds)} after sending stopped${meanwhile}`);
  }
  if (f.duplicateActions > 0) notes.push(`${who}: ${int(f.duplicateActions)} actions arrived twice`);
  if (f.cpuPerEvent) {
    const c = f.cpuPerEvent;
    notes.push(`${who}, CPU per event (drain included): main thread ${decimal(c.mainUserUs)} µs user + ${decimal(c.mainSystemUs)} µs system (${int(c.mainBusy * 100)} % of a core), other threads ${decimal(c.otherThreadsUs)} µs`);
  }
  const backends = backendsNote(f);
  if (backends) notes.push(`${who}, ${backends}`);
  if (f.postgres) {
    const p = f.postgres.perEvent;
    notes.push(`${who}, per event (pg_stat_database, start-up left out, ${int(f.postgres.events)} events): ${p.transactions.toFixed(2)} transactions, ${decimal(p.rowsRead)} rows read, ${decimal(p.rowsWritten)} rows written`);
    const wal = p.walBytes > 0 ? `${decimal(p.walBytes / 1000)} kB of write-ahead log (pg_stat_wal, the whole server)` : undefined;
    const u = f.postgres.updates;
    const hot = u === undefined ? undefined : `${u.perEvent.toFixed(1)} row updates of ${UPDATED_TABLES.join(', ')}, ${Math.round(u.hotShare * 100)} % of them HOT`;
    const written = [wal, hot].filter((x) => x !== undefined);
    if (written.length > 0) notes.push(`${who}, what the server wrote per event: ${written.join('; ')}`);
  }
  return notes.map((n) => `    ${n}`);
}

export function closedLoopLines(all: ClosedLoopFigures[], durationS: number): string[] {
  const lines: string[] = [];
  for (const kind of ['e2e', 'intake'] as const) {
    for (const mode of ['keep-alive', 'per-event'] as const) {
      const group = all.filter((f) => f.kind === kind && f.connectionMode === mode);
      if (group.length === 0) continue;
      const reference = referenceOf(all, kind, mode);
      const how = mode === 'keep-alive' ? 'keep-alive connections' : 'a new connection per webhook';
      lines.push(`closed loop, ${KIND_TITLE[kind]}; ${group[0].connections} clients, ${how}, ${durationS} s each:`);
      lines.push(...table([CLOSED_HEADER[kind], ...group.map((f) => closedRow(f, reference))]));
      lines.push(...group.flatMap(closedNotes), ...slicesLine(group), ...versusFlowEngine(group));
    }
  }
  return lines;
}

/**
 * The closed loops taken in turns (bench-interleaved.ts): each system's figure slice by slice, so that a moment the
 * machine was slow shows, and whether it fell on one system's slice or on the slices around it.
 */
export function slicesLine(group: ClosedLoopFigures[]): string[] {
  const sliced = group.filter((f) => f.slices !== undefined && f.slices.length > 1);
  if (sliced.length === 0) return [];
  const each = sliced.map((f) => `${systemLabel(f.system)} ${f.slices!.map((s) => int(s.eventsPerSecond)).join(' / ')}`);
  return [`    in turns, ${sliced[0]!.slices!.length} slices each (events/s, slice by slice): ${each.join('; ')}`];
}

/**
 * Events fully handled (the action arrived; on intake, the event processed) a second over the run and the drain after
 * it together: what a system sustains, where `eventsPerSecond` counts only what was done while sending, nothing for
 * a system that acknowledges at once and acts later (the in-memory flow engine, which then acts on none while sent to).
 */
export function handledPerSecond(f: ClosedLoopFigures): number {
  const seconds = f.seconds + f.drainSeconds;
  return seconds > 0 ? (f.eventsPerCpuSecond * f.cpuSeconds) / seconds : 0;
}

/**
 * The engine's figures over the in-memory flow engine's (Node-RED, bench/flow-engine.ts) of the same table, events
 * handled a second and per CPU-second: what the issue's goal asks of a durable engine, to be faster than one that
 * keeps its backlog in memory. Nothing when either is missing or handled nothing.
 */
export function versusFlowEngine(group: ClosedLoopFigures[]): string[] {
  const flow = group.find((f) => f.system === 'flow');
  const engines = group.filter((f) => isEngine(f.system));
  if (!flow || handledPerSecond(flow) <= 0 || flow.eventsPerCpuSecond <= 0 || engines.length === 0) return [];
  const each = engines.map((f) => `${systemLabel(f.system)} ${ratio(handledPerSecond(f) / handledPerSecond(flow))} (${int(handledPerSecond(f))} / ` +
    `${int(handledPerSecond(flow))} a second), ${ratio(f.eventsPerCpuSecond / flow.eventsPerCpuSecond)} per CPU-second`);
  return [`    events handled, sending and drain together, against the ${systemLabel('flow')}: ${each.join('; ')}`];
}

const OPEN_LOOP_RATES: Record<OpenLoopFigures['rateFrom'], string> = {
  'half the reference': "half the reference's closed-loop rate",
  'a quarter of the reference': "a quarter of the reference's closed-loop rate (half the rate the end-to-end target asks of the engine)",
  fixed: 'a fixed rate',
};

/** How long an open loop sent for: its own figure, or the run's `openDurationS` for results written before it had one. */
export function sentForSeconds(f: Pick<OpenLoopFigures, 'seconds'>, runSeconds: number): number {
  return f.seconds ?? runSeconds;
}

/**
 * One table for each rate the open loops ran at, and for each length of time they sent for: the run's `openDurationS`
 * unless the title says otherwise (bench-options.ts, SUSTAINED_OPEN_LOOP_S).
 */
export function openLoopLines(all: OpenLoopFigures[], drainLimitS: number, openDurationS: number): string[] {
  const group = (f: OpenLoopFigures) => `${f.rateFrom} ${sentForSeconds(f, openDurationS)}`;
  return [...new Set(all.map(group))].flatMap((g) => openLoopTable(all.filter((f) => group(f) === g), drainLimitS, openDurationS));
}

function openLoopTable(all: OpenLoopFigures[], drainLimitS: number, openDurationS: number): string[] {
  if (all.length === 0) return [];
  const first = all[0];
  const sentS = sentForSeconds(first, openDurationS);
  const longer = sentS !== openDurationS ? `, sent for ${sentS} s instead of ${openDurationS}` : '';
  const rate = `${OPEN_LOOP_RATES[first.rateFrom]}, ${int(first.ratePerSecond)} events/s${longer}`;
  const header = ['', 'delivered/s', 'e2e p50', 'e2e p99', 'e2e max', 'ack p99', 'not arrived', 'CPU', 'peak RSS', 'bench CPU', 'machine busy'];
  const rows = all.map((f) => [
    systemLabel(f.system), int(f.deliveredPerSecond), ms(f.latencyMs.p50), ms(f.latencyMs.p99), ms(f.latencyMs.max), ms(f.ackLatencyMs.p99),
    int(f.missing), `${int(f.cpuPercent)} %`, `${int(f.memory.peakRssMb ?? f.memory.rssMb)} MB`,
    `${int(f.benchCpuPercent)} %`, f.machineBusyPercent === undefined ? '–' : `${int(f.machineBusyPercent)} %`,
  ]);
  const notes = all.filter((f) => f.maxSendLagMs > 20 || f.duplicateActions > 0 || fellBehind(f)).map((f) =>
    `    ${systemLabel(f.system)}: ${fellBehind(f) ? `fell behind the offered rate (latency measures a growing queue)${saturated(f) ? ' on a machine with every core busy' : ''}; ` : ''}` +
    `load generator up to ${ms(f.maxSendLagMs)} late${f.duplicateActions > 0 ? `; ${int(f.duplicateActions)} actions arrived twice` : ''}`);
  return [
    `open loop, end to end at ${rate}, keep-alive (not arrived: ${drainLimitS} s after sending stopped; CPU: the system's, bench CPU: the load ` +
      'generator and fake service, each in % of one core; machine busy: all its cores, every process):',
    ...table([header, ...rows]), ...notes,
  ];
}

/** Delivered under 95 % of the rate offered: its latency then measures a growing queue. */
export const fellBehind = (f: Pick<OpenLoopFigures, 'deliveredPerSecond' | 'ratePerSecond'>): boolean => f.deliveredPerSecond < f.ratePerSecond * 0.95;

/** At or over this share of all cores busy, a system that fell behind was short of CPU (the machine's, not only its own). */
export const MACHINE_SATURATED_PERCENT = 90;

const saturated = (f: OpenLoopFigures): boolean => (f.machineBusyPercent ?? 0) >= MACHINE_SATURATED_PERCENT;

export function backlogLines(all: BacklogFigures[]): string[] {
  return all.flatMap((b) => [b.emptyQueue, b.backlog].some((d) => d.failed) ? [
    `backlog (${systemLabel(b.system)}): ${[b.emptyQueue, b.backlog].filter((d) => d.failed).map((d) => `with ${int(d.waiting)} events waiting, the engine was ${d.failed}`).join('; ')}`,
  ] : [
    `backlog (${systemLabel(b.system)}): two engines draining at once, over the ${seconds(b.windowSeconds ?? 0)} both did: with ${int(b.backlog.waiting)} events waiting ${int(b.backlog.eventsPerSecond)} actions/s, ` +
      `with ${int(b.emptyQueue.waiting)} waiting ${int(b.emptyQueue.eventsPerSecond)}/s: ${ratio(b.ratio)}`,
    `    ready ${seconds(b.backlog.readySeconds)} after spawning with the backlog (${seconds(b.emptyQueue.readySeconds)} without); peak RSS ${int(b.backlog.memory.peakRssMb ?? 0)} MB (${int(b.emptyQueue.memory.peakRssMb ?? 0)} MB)`,
  ]);
}

/** A start-up figure: the median, and over more than one start their range and count. */
export function startupSeconds(median: number, spread: StartupFigures['fresh']): string {
  if (!spread || spread.starts < 2) return seconds(median);
  return `${seconds(median)} (${spread.min.toFixed(2)}–${seconds(spread.max)}, median of ${spread.starts})`;
}

export function startupLines(all: StartupFigures[]): string[] {
  if (all.length === 0) return [];
  const restart = (s: StartupFigures) => (s.restartSeconds === undefined ? '' : `; restart ${startupSeconds(s.restartSeconds, s.restart)}`);
  const parts = all.map((s) => `${int(s.ruleFiles)} rule file${s.ruleFiles === 1 ? '' : 's'} ${startupSeconds(s.freshSeconds, s.fresh)}${restart(s)}`);
  return [`start-up, spawn to /health/ready (fresh SQLite file, migrations included): ${parts.join(' | ')}`];
}
