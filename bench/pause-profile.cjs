/**
 * Where an engine's latency tail comes from: a hook for the engine's `node`
 * (`--require`), not part of the engine. The open loops' p99 (`npm run
 * bench`, at half and a quarter of the reference's rate) is made by moments
 * when the main thread does nothing else for a while; this records those
 * moments and what the process was doing in them, with times that line up:
 *
 * - stalls: a 1 ms timer's lateness, each one over STALL_MS, with when it
 *   happened (ms since the process started);
 * - the event loop's delay, p50 / p99 / p99.9 / max (`monitorEventLoopDelay`);
 * - garbage collections by kind (scavenge, mark-compact, …): count, total,
 *   longest, and each one over LONG_MS with when it began;
 * - SQLite's COMMITs (the engine's durable ones sync the log; a checkpoint
 *   runs inside the COMMIT that crosses its threshold): count, total,
 *   longest, and each one over LONG_MS with when it began.
 *
 *   PAUSE_PROFILE_DIR=/tmp/pauses BENCH_ENGINE_NODE_ARGS="--require $PWD/bench/pause-profile.cjs" \
 *     BENCH_POSTGRES=off npm run bench -- --only open --open-rate 1600
 *
 * Each process writes `pause-profile-<pid>.json` and `.txt` into
 * PAUSE_PROFILE_DIR (the system's temporary folder by default) every second
 * and as it exits, its start included (the first seconds' stalls are V8
 * compiling and the migrations). The 1 ms timer and the COMMIT's two
 * `performance.now()` calls cost the process a little: compare runs that
 * both have the hook.
 */
'use strict';
const { tmpdir } = require('node:os');
const { PerformanceObserver, monitorEventLoopDelay, constants } = require('node:perf_hooks');
const { statementPrototype, writeSummaryEvery } = require('./hook-support.cjs');

/** A timer this late, or a pause or COMMIT this long, is listed with its time. */
const STALL_MS = 8;
const LONG_MS = 5;
/** The most listed of each, the latest kept. */
const LISTED = 500;

const GC_KINDS = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

/** Counts, total and longest of some kind of pause, and the long ones with their times. */
function tally() {
  return { count: 0, totalMs: 0, maxMs: 0, long: [] };
}

function add(t, startedAt, ms) {
  t.count += 1;
  t.totalMs += ms;
  t.maxMs = Math.max(t.maxMs, ms);
  if (ms > LONG_MS) {
    t.long.push([Math.round(startedAt), Number(ms.toFixed(1))]);
    if (t.long.length > LISTED) t.long.shift();
  }
}

function createPauses() {
  const gc = {};
  const commits = tally();
  const stalls = [];
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = GC_KINDS[entry.detail?.kind ?? entry.kind] ?? `kind ${entry.detail?.kind ?? entry.kind}`;
      add((gc[kind] ??= tally()), entry.startTime, entry.duration);
    }
  }).observe({ entryTypes: ['gc'] });
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const late = now - last - 1;
    last = now;
    if (late > STALL_MS) {
      stalls.push([Math.round(now - late), Number(late.toFixed(1))]);
      if (stalls.length > LISTED) stalls.shift();
    }
  }, 1).unref();
  return {
    commits,
    summary() {
      const ms = (ns) => Number((ns / 1e6).toFixed(2));
      return {
        loopDelayMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), p999: ms(delay.percentile(99.9)), max: ms(delay.max) },
        stalls,
        gc,
        commits,
      };
    },
  };
}

/** The summary as text: the loop's delay, then each kind of pause, then the stalls, all with their times. */
function report({ loopDelayMs, stalls, gc, commits }) {
  const line = (name, t) => `${name.padEnd(22)} ${String(t.count).padStart(7)} ${t.totalMs.toFixed(0).padStart(8)} ms ${(t.count ? t.totalMs / t.count : 0).toFixed(2).padStart(7)} ms each, longest ${t.maxMs.toFixed(1)} ms, ${t.long.length} over ${LONG_MS} ms`;
  const times = (list) => list.map(([at, ms]) => `${at}:${ms}`).join(' ');
  const lines = [
    `event loop delay: p50 ${loopDelayMs.p50} ms, p99 ${loopDelayMs.p99} ms, p99.9 ${loopDelayMs.p999} ms, max ${loopDelayMs.max} ms`,
    'pauses: count, total, each, longest',
    ...Object.entries(gc).map(([kind, t]) => line(`gc ${kind}`, t)),
    line('SQLite COMMIT', commits),
    '',
    `stalls (a 1 ms timer over ${STALL_MS} ms late), at ms since start: lateness`,
    times(stalls),
    '',
    `long pauses (over ${LONG_MS} ms), at ms since start: duration`,
    ...Object.entries(gc).map(([kind, t]) => `gc ${kind}: ${times(t.long)}`),
    `SQLite COMMIT: ${times(commits.long)}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** Times better-sqlite3's COMMITs (the engine runs each as a prepared statement). */
function timeCommits(commits) {
  const prototype = statementPrototype();
  if (prototype === undefined) return; // no SQLite driver: a PostgreSQL engine's pauses only
  const original = prototype.run;
  prototype.run = function timed(...params) {
    if (this.source !== 'COMMIT') return original.apply(this, params);
    const started = performance.now();
    try {
      return original.apply(this, params);
    } finally {
      add(commits, started, performance.now() - started);
    }
  };
}

{
  const pauses = createPauses();
  timeCommits(pauses.commits);
  writeSummaryEvery(process.env.PAUSE_PROFILE_DIR ?? tmpdir(), 'pause-profile', () => pauses.summary(), report, 1_000);
}
