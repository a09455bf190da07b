/**
 * End to end, open loop: matching events sent at a fixed rate whatever the
 * answers do, so a slow system shows up as latency rather than as a lower
 * offered load. The rate is half the reference server's closed-loop end-to-end
 * rate measured in the same run (BENCH_E2E_RATE or --open-rate fixes it
 * instead): the latency of a system asked for half of what the reference
 * sustains. SQLite's is also measured at a quarter of it, half the rate the
 * end-to-end target asks of the engine (0.5 × the reference): the latency of
 * an engine asked for half of what it should sustain.
 *
 * Each latency is from the moment the webhook was due to the arrival, at the
 * fake service, of the action made for it (both read the same clock), so time
 * spent waiting for a connection in the client is counted, not hidden. A
 * warm-up at the same rate runs first (BenchOptions.warmUpS: 10 s in a full
 * run). With a warm-up of about a second the engine's p99 measured V8 still
 * compiling its hot code, not the engine: 49–164 ms at a quarter of the
 * reference's rate, against 16–31 ms after 10 s at that rate.
 *
 * The measured window is 5 s (BENCH_E2E_DURATION_S), and a full run also sends
 * SQLite the half rate for SUSTAINED_OPEN_LOOP_S (bench-options.ts): at about all the engine can
 * sustain, 5 s says whether it keeps up for seconds, not whether it works off
 * the stalls a longer stretch brings (session 83: met over 5 s, behind in three
 * runs of five over 20). Both are judged (bench-targets.ts).
 */
import type { BenchDatabase } from './bench-databases.js';
import type { BenchEngine, EngineMemory } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import type { ArrivalLog } from './bench-fake-service.js';
import { openLoop, summarize, WebhookPoster, type LatencySummary, type OpenLoopResult, type PreparedEvent } from './bench-load.js';
import type { Layout } from './bench-options.js';
import { busyPercent, machineTicks } from './machine-cpu.js';
import { drain, startSystem, type ScenarioContext, type SystemName } from './bench-systems.js';

export interface OpenLoopFigures {
  system: SystemName;
  layout: Layout;
  ratePerSecond: number;
  /** Where the rate came from. */
  rateFrom: OpenLoopRateFrom;
  /** How long the measured events were sent for, after the warm-up (absent in results written before session 84: 5 s, or BENCH_E2E_DURATION_S). */
  seconds?: number;
  sent: number;
  delivered: number;
  /** Acknowledged events whose action had not arrived at the drain limit. */
  missing: number;
  /** Delivered actions per second, first send to last arrival. */
  deliveredPerSecond: number;
  latencyMs: LatencySummary;
  ackLatencyMs: LatencySummary;
  /** How late the load generator sent its latest event: large values mean the generator, not the system, fell behind. */
  maxSendLagMs: number;
  duplicateActions: number;
  /** Share of one core the system used, first send to last arrival. */
  cpuPercent: number;
  /** The same for the benchmark's own process (the load generator and the fake service), over the same span. */
  benchCpuPercent: number;
  /**
   * Share of all the machine's cores busy, every process counted, from the first send until the drain ended (all
   * acted on, or the drain limit): undefined off Linux.
   */
  machineBusyPercent?: number;
  memory: EngineMemory;
}

/** Half the reference's closed-loop end-to-end rate, a quarter of it, or a rate given. */
export type OpenLoopRateFrom = 'half the reference' | 'a quarter of the reference' | 'fixed';

/** Enough sockets that a healthy system never makes a webhook wait for one. */
export const OPEN_LOOP_SOCKETS = 512;

async function sendAndWait(ctx: ScenarioContext, poster: WebhookPoster, events: PreparedEvent[], rate: number, arrivals: ArrivalLog): Promise<OpenLoopResult> {
  const sent = await openLoop(poster, events, rate);
  const acked = sent.statuses['202'] ?? 0;
  await drain(() => acked - arrivals.arrived(), ctx.options.drainLimitS * 1000);
  return sent;
}

/** Each event's webhook-to-action latency (from the moment it was due), the actions delivered, and their rate, first send to last arrival. */
export function joinOpenLoop(sent: OpenLoopResult, arrivals: ArrivalLog, count: number) {
  const latencies = new Float64Array(count);
  let n = 0;
  let lastArrival = -Infinity;
  for (let i = 0; i < count; i++) {
    const arrived = arrivals.arrivals[i];
    if (arrived === 0) continue;
    latencies[n++] = Math.max(0, arrived - sent.sentAt[i]);
    lastArrival = Math.max(lastArrival, arrived);
  }
  const span = (lastArrival - sent.sentAt[0]) / 1000;
  return { delivered: n, latencyMs: summarize(latencies, n), deliveredPerSecond: n > 0 && span > 0 ? n / span : 0, span };
}

async function measure(ctx: ScenarioContext, target: BenchEngine, rate: number, seconds: number): Promise<Omit<OpenLoopFigures, 'system' | 'rateFrom'>> {
  const count = Math.max(1, Math.round(rate * seconds));
  const poster = new WebhookPoster(target.url, OPEN_LOOP_SOCKETS);
  try {
    const warmPrefix = runPrefix('open_warm');
    const warm = Math.max(1, Math.min(ctx.options.warmUpEvents, Math.round(rate * ctx.options.warmUpS)));
    await sendAndWait(ctx, poster, signedEvents('matching', warmPrefix, warm), rate, await ctx.fake.beginRun(warmPrefix, warm));
    const prefix = runPrefix('open');
    const events = signedEvents('matching', prefix, count);
    const arrivals = await ctx.fake.beginRun(prefix, count);
    const cpuBefore = target.cpuSeconds();
    const benchBefore = process.cpuUsage();
    const machineBefore = machineTicks();
    const sent = await sendAndWait(ctx, poster, events, rate, arrivals);
    const bench = process.cpuUsage(benchBefore);
    const machineBusy = busyPercent(machineBefore, machineTicks());
    const joined = joinOpenLoop(sent, arrivals, count);
    const share = (cpuSeconds: number) => (joined.span > 0 ? (cpuSeconds / joined.span) * 100 : 0);
    return {
      layout: target.layout, ratePerSecond: rate, seconds, sent: count, delivered: joined.delivered,
      missing: (sent.statuses['202'] ?? 0) - joined.delivered,
      deliveredPerSecond: joined.deliveredPerSecond, latencyMs: joined.latencyMs, ackLatencyMs: sent.ackLatencyMs,
      maxSendLagMs: sent.maxSendLagMs, duplicateActions: arrivals.duplicates(),
      cpuPercent: share(target.cpuSeconds() - cpuBefore),
      benchCpuPercent: share((bench.user + bench.system) / 1e6),
      machineBusyPercent: machineBusy,
      memory: target.memory(),
    };
  } finally {
    poster.close();
  }
}

export async function runOpenLoop(
  ctx: ScenarioContext, system: SystemName, database: BenchDatabase, rate: number, rateFrom: OpenLoopFigures['rateFrom'], seconds = ctx.options.openDurationS,
): Promise<OpenLoopFigures> {
  ctx.progress(`open loop (${system}): ${Math.round(rate).toLocaleString('en-US')} events/s for ${seconds} s …`);
  const target = await startSystem(ctx, system, database, 'open');
  try {
    return { system, rateFrom, ...(await measure(ctx, target, rate, seconds)) };
  } finally {
    await target.stop();
  }
}
