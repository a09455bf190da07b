/**
 * End to end: from the moment a webhook is sent to the moment the simulator
 * receives the `POST /v1/tasks` the rule makes for it. Events go out at a fixed
 * moderate rate (an open loop), so the figure is the latency of a healthy
 * engine, not of a saturated one.
 *
 * The simulator runs in this process and both ends read the same clock; its
 * request log stamps arrivals with millisecond ISO times, so each latency is
 * known to within about a millisecond.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { waitUntil } from '../test/support/wait.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import { BENCH_SECRET, startEngine } from './bench-engine.js';
import { profileDirFor, type ScenarioContext } from './bench-intake.js';
import { openLoop, prepareEvents, summarize, WebhookPoster, type LatencySummary, type PreparedEvent } from './bench-load.js';
import type { Layout } from './bench-options.js';

export interface EndToEndFigures {
  database: DatabaseName;
  layout: Layout;
  ratePerSecond: number;
  sent: number;
  delivered: number;
  /** Events whose action request never reached the simulator within the wait. */
  missing: number;
  /** Delivered action requests per second, first send to last arrival. */
  throughputPerSecond: number;
  latencyMs: LatencySummary;
  /** The webhook's own answer time, for comparison. */
  ackLatencyMs: LatencySummary;
  /** Share of one core the engine used from the first send to the last arrival (whole process in process). */
  engineCpuPercent: number;
}

const TITLE = /^Follow-up (\S+)$/;
const POLL_MS = 20;

function e2eEvent(tag: string) {
  return (i: number) => ({
    id: `evt_${tag}_${i}`,
    type: 'task.created',
    created_at: new Date().toISOString(),
    data: { task: { id: `tsk_${tag}_${i}`, project_id: 'prj_1', title: `Bench task ${i}`, status: 'open', assignee_id: null } },
  });
}

/**
 * Reads the simulator's request log from `from` on and notes, per event id, when
 * its action request arrived; resolves once every wanted id is seen or time is up.
 */
async function collectArrivals(sim: Simulator, from: number, wanted: ReadonlySet<string>, timeoutMs: number): Promise<Map<string, number>> {
  const arrivals = new Map<string, number>();
  let scanned = from;
  const allArrived = () => {
    const log = sim.requests;
    for (; scanned < log.length; scanned++) {
      const entry = log[scanned];
      if (entry.method !== 'POST' || entry.path !== '/v1/tasks') continue;
      const title = (entry.body as { title?: unknown } | undefined)?.title;
      const id = typeof title === 'string' ? TITLE.exec(title)?.[1] : undefined;
      if (id !== undefined && wanted.has(id) && !arrivals.has(id)) arrivals.set(id, Date.parse(entry.time));
    }
    return arrivals.size >= wanted.size;
  };
  // Time running out is a figure, not a failure: what has not arrived by then is reported as missing.
  await waitUntil(allArrived, { timeoutMs, intervalMs: POLL_MS, what: 'the action requests' }).catch(() => undefined);
  return arrivals;
}

async function sendAndCollect(poster: WebhookPoster, sim: Simulator, events: PreparedEvent[], rate: number, waitMs: number) {
  const from = sim.requests.length;
  const sent = await openLoop(poster, events, rate);
  const arrivals = await collectArrivals(sim, from, new Set(sent.sentAt.keys()), waitMs);
  return { sent, arrivals };
}

/** Latency per delivered event (arrival at the simulator minus the moment it was due), and the delivered rate. */
function joinArrivals(sentAt: ReadonlyMap<string, number>, arrivals: ReadonlyMap<string, number>) {
  const latencies = new Float64Array(arrivals.size);
  let n = 0;
  let firstSent = Infinity;
  let lastArrival = -Infinity;
  for (const [id, sent] of sentAt) {
    firstSent = Math.min(firstSent, sent);
    const arrived = arrivals.get(id);
    if (arrived === undefined) continue;
    latencies[n++] = Math.max(0, arrived - sent);
    lastArrival = Math.max(lastArrival, arrived);
  }
  return { delivered: n, latencyMs: summarize(latencies, n), throughputPerSecond: n > 0 ? n / ((lastArrival - firstSent) / 1000) : 0 };
}

export async function runEndToEnd(ctx: ScenarioContext, sim: Simulator, database: BenchDatabase): Promise<EndToEndFigures> {
  const { options } = ctx;
  const tag = `e2e_${database.name}_${Date.now().toString(36)}`;
  const count = Math.max(1, Math.round(options.e2eRate * options.e2eDurationS));
  const warmUp = prepareEvents(Math.min(200, count), BENCH_SECRET, e2eEvent(`${tag}_warm`));
  const events = prepareEvents(count, BENCH_SECRET, e2eEvent(tag));
  const profileDir = profileDirFor(ctx, 'e2e', database.name);
  const engine = await startEngine({ layout: options.layout, databaseUrl: database.url, serviceUrl: ctx.serviceUrl, profileDir }, ctx.cleanup);
  const poster = new WebhookPoster(engine.url, 64);
  const waitMs = options.quick ? 15_000 : 30_000;
  try {
    ctx.progress(`end to end (${database.name}): warming up, then ${count} events at ${options.e2eRate}/s …`);
    await sendAndCollect(poster, sim, warmUp, options.e2eRate, waitMs);
    const cpuBefore = engine.cpuSeconds();
    const started = performance.now();
    const { sent, arrivals } = await sendAndCollect(poster, sim, events, options.e2eRate, waitMs);
    const engineCpuPercent = ((engine.cpuSeconds() - cpuBefore) / ((performance.now() - started) / 1000)) * 100;
    const { delivered, latencyMs, throughputPerSecond } = joinArrivals(sent.sentAt, arrivals);
    return {
      database: database.name,
      layout: engine.layout,
      ratePerSecond: options.e2eRate,
      sent: events.length,
      delivered,
      missing: events.length - delivered,
      throughputPerSecond,
      latencyMs,
      ackLatencyMs: sent.ackLatencyMs,
      engineCpuPercent,
    };
  } finally {
    poster.close();
    await engine.stop();
  }
}
