/**
 * The fast-path targets, each with the figure this run measured and whether it
 * was met, printed as a Markdown table so a closing note can quote it. The
 * targets are set for a full run (`npm run bench`) at 32 connections on the
 * 2-core development machine; the table says when this run was not that.
 */
import type { ClosedLoopFigures } from './bench-closed.js';
import type { OpenLoopFigures } from './bench-e2e.js';
import { SUSTAINED_OPEN_LOOP_S } from './bench-options.js';
import type { BenchResults, TargetVerdict } from './bench-results.js';
import { decimal, fellBehind, handledPerSecond, int, ms, ratio, referenceOf, seconds, sentForSeconds, startupSeconds } from './bench-tables.js';
import { claimTime } from './bench-waiting.js';
import { isEngine } from './bench-systems.js';

/** Share of a core (%) above which the load generator may have been what capped a closed loop (bench-report.ts warns). */
export const LOAD_GENERATOR_BUSY = 85;

type Check = { figure: string; met: boolean } | undefined;

const PEAK_RSS_MB = 200;
const STARTUP_S = 2;
/** "No growing backlog": what was acknowledged is done within this long after sending stops. */
const KEEPS_UP_DRAIN_S = 1;
/** "Waiting executions cost nothing while they wait": with 100,000 waiting, within this of one waiting. */
const WAITING_RATIO = 1.2;
const WAITING_TARGET = 100_000;

/**
 * A ratio judged against `least`, with a third decimal when two would hide on which side of it the ratio falls
 * (3,118 / 6,283 is 0.496×, not met, which two decimals print as 0.50×).
 */
export function ratioAgainst(n: number, least: number): string {
  return n.toFixed(2) === least.toFixed(2) && n !== least ? `${n.toFixed(3)}×` : ratio(n);
}

function closed(r: BenchResults, system: ClosedLoopFigures['system'], kind: ClosedLoopFigures['kind']): ClosedLoopFigures | undefined {
  return r.closedLoop.find((f) => f.system === system && f.kind === kind && f.connectionMode === 'keep-alive');
}

/**
 * `a`'s events/s against `b`'s. When the load generator beside `b` was busy (LOAD_GENERATOR_BUSY), `b`'s figure may be
 * the benchmark's limit rather than its own, and the ratio flatters `a`: the target is then met only if `a`'s events per
 * CPU-second (with its database's, when measured) also reach `least` × `b`'s, and the figure says so.
 */
export function versus(a: ClosedLoopFigures | undefined, b: ClosedLoopFigures | undefined, least: number, unit = 'events/s'): Check {
  if (!a || !b || b.eventsPerSecond <= 0) return undefined;
  const r = a.eventsPerSecond / b.eventsPerSecond;
  const figure = `${ratioAgainst(r, least)} (${int(a.eventsPerSecond)} / ${int(b.eventsPerSecond)} ${unit})`;
  if (b.benchCpuPercent < LOAD_GENERATOR_BUSY) return { figure, met: r >= least };
  const perCpu = cpuEfficiency(a) / cpuEfficiency(b);
  const capped = `the load generator beside the ${b.system} at ${Math.round(b.benchCpuPercent)} % of a core, so judged also per CPU-second: ${ratioAgainst(perCpu, least)}`;
  return { figure: `${figure}; ${capped}`, met: r >= least && perCpu >= least };
}

/** Events per CPU-second, the database's CPU included when it was measured. */
function cpuEfficiency(f: ClosedLoopFigures): number {
  return f.eventsPerCpuSecondWithDatabase ?? f.eventsPerCpuSecond;
}

/**
 * SQLite's open-loop p99 at the rate asked (a fixed rate never meets the target). The issue's "e2e p99 < 50 ms when
 * sent at half that rate" reads two ways: half the reference's rate, or half the 0.5 × reference the engine should
 * sustain; both are judged (README, Performance: Targets).
 */
function openLoopP99(r: BenchResults, from: 'half the reference' | 'a quarter of the reference', sustained = false): Check {
  if (r.openLoop.length === 0) return undefined;
  const windowS = sustained ? SUSTAINED_OPEN_LOOP_S : r.options.openDurationS;
  const sentFor = (o: OpenLoopFigures) => sentForSeconds(o, r.options.openDurationS) === windowS;
  const f = r.openLoop.find((o) => o.system === 'sqlite' && sentFor(o) && (o.rateFrom === from || (from === 'half the reference' && o.rateFrom === 'fixed')));
  if (!f) return undefined;
  const at = `${int(f.ratePerSecond)} events/s${f.rateFrom === 'fixed' ? ', a fixed rate' : ''}`;
  const missing = f.missing > 0 ? `, ${int(f.missing)} not arrived` : '';
  const behind = fellBehind(f) ? `, behind (${int(f.deliveredPerSecond)} delivered a second)` : '';
  // The reference's own p99 at the half rate says what this machine allowed at the time (sent for the run's duration).
  const ref = r.openLoop.find((o) => o.system === 'reference' && o.rateFrom === f.rateFrom);
  const anchor = ref ? `; reference p99 ${ms(ref.latencyMs.p99)}${sentFor(ref) ? '' : ` over ${sentForSeconds(ref, r.options.openDurationS)} s`}` : '';
  return { figure: `p99 ${ms(f.latencyMs.p99)} at ${at}${missing}${behind}${anchor}`, met: f.latencyMs.p99 < 50 && f.missing === 0 && f.rateFrom !== 'fixed' };
}

function keepsUp(f: ClosedLoopFigures | undefined): Check {
  if (!f) return undefined;
  const done = f.leftAfterDrain > 0 ? `${int(f.leftAfterDrain)} not done after ${seconds(f.drainSeconds)}` : `all done ${seconds(f.drainSeconds)} after sending stopped`;
  return { figure: `acknowledged ${int(f.acknowledgedPerSecond)}/s, acted ${int(f.eventsPerSecond)}/s; ${done}`, met: f.leftAfterDrain === 0 && f.drainSeconds <= KEEPS_UP_DRAIN_S };
}

function perEvent(f: ClosedLoopFigures | undefined, key: 'transactions' | 'rowsRead', most: number): Check {
  const value = f?.postgres?.perEvent[key];
  if (value === undefined) return undefined;
  return { figure: `${key === 'transactions' ? value.toFixed(2) : decimal(value)} per event`, met: value <= most };
}

function backlog(r: BenchResults, system: 'sqlite' | 'postgres'): Check {
  const b = r.backlog.find((x) => x.system === system);
  if (!b) return undefined;
  const failed = [b.emptyQueue, b.backlog].find((d) => d.failed);
  if (failed) return { figure: `with ${int(failed.waiting)} waiting: ${failed.failed}`, met: false };
  return { figure: `${ratioAgainst(b.ratio, 0.8)} (${int(b.backlog.eventsPerSecond)}/s with ${int(b.backlog.waiting)} waiting, ${int(b.emptyQueue.eventsPerSecond)}/s with ${int(b.emptyQueue.waiting)})`, met: b.ratio >= 0.8 };
}

function peakRss(r: BenchResults): Check {
  const runs = [
    ...r.closedLoop.filter((f) => isEngine(f.system)).map((f) => ({ mb: f.memory.peakRssMb, what: `${f.kind} ${f.connectionMode} ${f.system}` })),
    ...r.openLoop.filter((f) => isEngine(f.system)).map((f) => {
      const sentS = sentForSeconds(f, r.options.openDurationS);
      return { mb: f.memory.peakRssMb, what: `open loop ${f.system}${sentS !== r.options.openDurationS ? ` ${sentS} s` : ''}` };
    }),
    ...r.backlog.flatMap((b) => [b.emptyQueue, b.backlog].map((d) => ({ mb: d.memory.peakRssMb, what: `backlog ${int(d.waiting)} ${b.system}` }))),
    ...r.waiting.flatMap((w) => [w.empty, w.seeded].map((d) => ({ mb: d.peakRssMb, what: `${int(d.waiting)} waiting ${w.system}` }))),
  ].filter((x): x is { mb: number; what: string } => x.mb !== undefined);
  if (runs.length === 0) return undefined;
  const worst = runs.reduce((a, b) => (b.mb > a.mb ? b : a));
  return { figure: `highest ${int(worst.mb)} MB (${worst.what}), over ${runs.length} engine runs`, met: worst.mb <= PEAK_RSS_MB };
}

/**
 * The issue's goal beyond its figures: a durable engine that outruns the engines keeping their backlog in memory. Each
 * engine measured end to end over the flow engine (bench/flow-engine.ts), by the events each handled a second over
 * its run and drain together (bench-tables.ts handledPerSecond): met when every one handled more.
 */
const DATABASE_LABEL = { sqlite: 'SQLite', postgres: 'PostgreSQL' } as const;

function fasterThanFlowEngine(r: BenchResults): Check {
  const flow = closed(r, 'flow', 'e2e');
  const engines = (['sqlite', 'postgres'] as const).flatMap((name) => closed(r, name, 'e2e') ?? []);
  if (!flow || handledPerSecond(flow) <= 0 || engines.length === 0) return undefined;
  const each = engines.map((f) => `${DATABASE_LABEL[f.system as keyof typeof DATABASE_LABEL]} ${ratio(handledPerSecond(f) / handledPerSecond(flow))}`);
  return { figure: `${each.join(', ')} Node-RED's (${int(handledPerSecond(flow))} a second)`, met: engines.every((f) => handledPerSecond(f) > handledPerSecond(flow)) };
}

/** Judged on the medians of a full run's starts (bench-startup.ts), fresh and restarting: the slower of the two. */
function startup(r: BenchResults): Check {
  const s = r.startup.find((x) => x.ruleFiles >= 1_000);
  if (!s) return undefined;
  const worst = Math.max(s.freshSeconds, s.restartSeconds ?? 0);
  const restart = s.restartSeconds === undefined ? '' : `, ${startupSeconds(s.restartSeconds, s.restart)} restart`;
  return { figure: `${startupSeconds(s.freshSeconds, s.fresh)} fresh${restart} (${int(s.ruleFiles)} files)`, met: worst <= STARTUP_S };
}

/** Claim time and RSS with many executions waiting, against one waiting; and none of them claimed before it is due. */
function waiting(r: BenchResults, system: 'sqlite' | 'postgres'): Check {
  const f = r.waiting.find((x) => x.system === system);
  if (!f) return undefined;
  const q = f.ratios;
  const within = (x: number) => x <= WAITING_RATIO;
  const peak = f.seeded.peakRssMb === undefined ? 'peak RSS not measured (in process)' : `peak RSS ${int(f.seeded.peakRssMb)} / ${int(f.empty.peakRssMb ?? 0)} MB (${ratio(q.peakRss)})`;
  const figure = `claim p50 ${claimTime(f.seeded.claimMs.p50)} / ${claimTime(f.empty.claimMs.p50)} (${ratio(q.claimP50)}), idle RSS ${int(f.seeded.steadyRssMb)} / ${int(f.empty.steadyRssMb)} MB (${ratio(q.steadyRss)}), ${peak}; ${int(f.waiting)} waiting, ${int(f.touched)} touched`;
  const untouched = f.touched === 0 && f.seeded.claimed === 0 && f.empty.claimed === 0;
  return { figure, met: untouched && within(q.claimP50) && within(q.steadyRss) && (f.seeded.peakRssMb === undefined || within(q.peakRss)) };
}

function verdict(target: string, check: Check): TargetVerdict {
  if (check === undefined) return { target, figure: '–', verdict: 'not measured' };
  return { target, figure: check.figure, verdict: check.met ? 'met' : 'not met' };
}

export function judgeTargets(r: BenchResults): TargetVerdict[] {
  const e2e = (s: ClosedLoopFigures['system']) => closed(r, s, 'e2e');
  const intake = (s: ClosedLoopFigures['system']) => closed(r, s, 'intake');
  return [
    verdict('SQLite end to end ≥ 0.5 × reference (closed loop)', versus(e2e('sqlite'), referenceOf(r.closedLoop, 'e2e', 'keep-alive'), 0.5)),
    verdict('SQLite e2e p99 < 50 ms at half the reference rate (open loop)', openLoopP99(r, 'half the reference')),
    verdict('SQLite e2e p99 < 50 ms at half of 0.5 × the reference rate (open loop)', openLoopP99(r, 'a quarter of the reference')),
    verdict(`SQLite e2e p99 < 50 ms at half the reference rate, sent for ${SUSTAINED_OPEN_LOOP_S} s (open loop)`, openLoopP99(r, 'half the reference', true)),
    verdict('SQLite intake, no matching rule ≥ 0.7 × reference', versus(intake('sqlite'), intake('reference'), 0.7)),
    verdict('PostgreSQL intake, no matching rule ≥ 0.7 × reference', versus(intake('postgres'), intake('reference'), 0.7)),
    verdict('PostgreSQL end to end ≥ 0.7 × SQLite (closed loop)', versus(e2e('postgres'), e2e('sqlite'), 0.7)),
    verdict(`PostgreSQL processing keeps up with intake (drained ≤ ${KEEPS_UP_DRAIN_S} s after sending)`, keepsUp(e2e('postgres'))),
    verdict('PostgreSQL ≤ 1.5 transactions per event (end to end)', perEvent(e2e('postgres'), 'transactions', 1.5)),
    verdict('PostgreSQL ≤ 30 rows read per event (end to end)', perEvent(e2e('postgres'), 'rowsRead', 30)),
    verdict('SQLite drain rate with a backlog ≥ 0.8 × empty queue', backlog(r, 'sqlite')),
    verdict('PostgreSQL drain rate with a backlog ≥ 0.8 × empty queue', backlog(r, 'postgres')),
    verdict(`engine peak RSS ≤ ${PEAK_RSS_MB} MB in these runs`, peakRss(r)),
    verdict(`start-up ≤ ${STARTUP_S} s with 1,000 rule files`, startup(r)),
    verdict('the goal: end to end faster than an in-memory flow engine (events handled a second)', fasterThanFlowEngine(r)),
    verdict(`SQLite: claim time and RSS with ${int(WAITING_TARGET)} waiting within ${WAITING_RATIO}× of an empty database, none touched`, waiting(r, 'sqlite')),
    verdict(`PostgreSQL: claim time and RSS with ${int(WAITING_TARGET)} waiting within ${WAITING_RATIO}× of an empty database, none touched`, waiting(r, 'postgres')),
  ];
}

/** The caveat above the table when this run is not the one the targets are set for. */
function conditions(r: BenchResults): string {
  const o = r.options;
  const unlike = [
    o.quick ? 'a --quick run (short, small backlog): indicative only' : undefined,
    o.connections !== 32 ? `${o.connections} connections, not 32` : undefined,
    o.backlog < 200_000 ? `a backlog of ${int(o.backlog)}, not 200,000` : undefined,
    r.waiting.length > 0 && o.waiting < WAITING_TARGET ? `${int(o.waiting)} waiting executions, not ${int(WAITING_TARGET)}` : undefined,
  ].filter((x) => x !== undefined);
  return unlike.length > 0 ? `; this run: ${unlike.join('; ')}` : '';
}

export function targetLines(r: BenchResults, paint: { green: (s: string) => string; red: (s: string) => string }): string[] {
  const rows = r.targets.map((t) => `| ${t.target} | ${t.figure} | ${t.verdict === 'met' ? paint.green(t.verdict) : t.verdict === 'not met' ? paint.red(t.verdict) : t.verdict} |`);
  return [
    `targets (closed loop at 32 connections, keep-alive, unless said)${conditions(r)}:`,
    '| target | figure | |',
    '|---|---|---|',
    ...rows,
  ];
}
