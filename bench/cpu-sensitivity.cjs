/**
 * How much an engine's throughput depends on CPU spent on its main thread,
 * and how much on CPU spent on another of its threads: a hook for the
 * engine's `node` (`--require`), not part of the engine. It adds a fixed
 * amount of work for every webhook the engine receives, either on the main
 * thread (in the request's own turn, before the engine sees it) or on a
 * worker thread of the hook's (handed over with one `postMessage`, as a
 * design that moved work off the main thread would hand it over, and not
 * waited for).
 *
 * Why: the step the README names for SQLite (the hot path's transactions
 * run whole on a worker thread) pays only if the main thread is what limits
 * the engine, not the machine's two cores, which the engine shares with the
 * load generator and the fake service. Work added on the main thread shows
 * what taking work off it would gain; the same work added on a worker shows
 * what moving it there would still cost. If the two cost the same, the
 * machine is the limit and moving work between threads gains nothing.
 *
 *   CPU_SENSITIVITY=main:100 BENCH_ENGINE_NODE_ARGS="--require $PWD/bench/cpu-sensitivity.cjs" \
 *     BENCH_POSTGRES=off npm run bench -- --only e2e
 *
 * CPU_SENSITIVITY is `main:<µs>` or `worker:<µs>`: the work per webhook, in
 * microseconds, measured where it runs (calibratedWork). Unset or `off`: the
 * hook does nothing. Each process writes `cpu-sensitivity-<pid>.txt` and
 * `.json` (the calls and their mean time) into CPU_SENSITIVITY_DIR (the
 * system's temporary folder by default) every second and as it exits.
 */
'use strict';
const http = require('node:http');
const { tmpdir } = require('node:os');
const { Worker, isMainThread } = require('node:worker_threads');
const { writeSummaryEvery } = require('./hook-support.cjs');

/** A loop of integer arithmetic the compiler cannot drop: `n` iterations. */
function spin(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) | 0;
  return x;
}

/** `main:100` → { where: 'main', us: 100 }; undefined when off; an error for anything else. */
function parseSetting(text) {
  if (text === undefined || text === '' || text === 'off') return undefined;
  const match = /^(main|worker):(\d+(?:\.\d+)?)$/.exec(text);
  if (!match) throw new Error(`CPU_SENSITIVITY must be main:<µs> or worker:<µs> (or off), not ${JSON.stringify(text)}`);
  return { where: match[1], us: Number(match[2]) };
}

/**
 * Work of `us` microseconds a call, measured where it runs: the number of iterations is set again every 16 calls
 * from their mean time, since the same loop runs several times faster once V8 has optimized it in place than when
 * it is first timed (1.1–1.3 against 5 ns an iteration here). It starts at the slower speed. Returns the work and
 * its tally.
 */
function calibratedWork(us) {
  const tally = { calls: 0, ns: 0, iterations: Math.max(1, Math.round(us * 200)) };
  let windowCalls = 0;
  let windowNs = 0;
  let sink = 0;
  const work = () => {
    const started = process.hrtime.bigint();
    sink ^= spin(tally.iterations);
    const ns = Number(process.hrtime.bigint() - started);
    tally.calls += 1;
    tally.ns += ns;
    windowCalls += 1;
    windowNs += ns;
    if (windowCalls === 16) {
      const nsPerIteration = windowNs / windowCalls / tally.iterations;
      if (nsPerIteration > 0) tally.iterations = Math.max(1, Math.round((us * 1000) / nsPerIteration));
      windowCalls = 0;
      windowNs = 0;
    }
    return sink;
  };
  return { work, tally };
}

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
${spin.toString()}
${calibratedWork.toString()}
let work;
let tally;
parentPort.on('message', (message) => {
  if (typeof message === 'number') ({ work, tally } = calibratedWork(message));
  else if (message === 'tally') parentPort.postMessage({ ...tally });
  else work();
});
`;

function install(setting) {
  let work;
  let tallyOf;
  if (setting.where === 'main') {
    const calibrated = calibratedWork(setting.us);
    work = calibrated.work;
    tallyOf = () => calibrated.tally;
  } else {
    // Without the process's options: a worker preloads `--require` modules too, this hook among them.
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
    worker.postMessage(setting.us);
    work = () => worker.postMessage(true);
    let last = { calls: 0, ns: 0, iterations: 0 };
    worker.on('message', (tally) => (last = tally));
    worker.unref(); // after the listener, which would hold the process open again
    setInterval(() => worker.postMessage('tally'), 1000).unref();
    tallyOf = () => last;
  }
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (event, request, ...rest) {
    if (event === 'request' && request.method === 'POST' && request.url.startsWith('/webhooks')) work();
    return emit.call(this, event, request, ...rest);
  };
  const summarize = () => {
    const tally = tallyOf();
    return { setting, calls: tally.calls, meanUs: tally.calls === 0 ? 0 : tally.ns / tally.calls / 1000, iterations: tally.iterations };
  };
  const report = (s) => `${s.setting.where}: ${s.calls} calls of ${s.setting.us} µs asked, ${s.meanUs.toFixed(1)} µs each on average (${s.iterations} iterations at the end)\n`;
  writeSummaryEvery(process.env.CPU_SENSITIVITY_DIR || tmpdir(), 'cpu-sensitivity', summarize, report, 1000);
  process.stderr.write(`cpu-sensitivity: ${setting.us} µs per webhook on the ${setting.where === 'main' ? 'main thread' : 'hook\'s worker thread'}\n`);
}

// The engine's main thread only: `--require` preloads into every worker thread as well.
const setting = parseSetting(process.env.CPU_SENSITIVITY);
if (setting && isMainThread) install(setting);

module.exports = { parseSetting, spin, calibratedWork };
