/**
 * The load generator. It shares a machine (2 cores here) with the engine, so it
 * is kept as cheap per request as Node allows: plain node:http over a keep-alive
 * Agent, bodies and signatures computed before the clock starts, latencies
 * written into a preallocated Float64Array, nothing parsed from the answers.
 */
import { Agent, request } from 'node:http';
import { signBody } from '../src/intake/signature.js';

export interface PreparedEvent {
  id: string;
  body: Buffer;
  signature: string;
}

export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export interface ClosedLoopResult {
  /** Events 0 … sent-1 were sent (lanes take them in order). */
  sent: number;
  /** Per event: epoch ms (sub-millisecond) at which its request started, and its HTTP status (0: no answer). */
  sentAt: Float64Array;
  statusOf: Uint16Array;
  /** By HTTP status; 0 counts requests that got no answer (connection errors). */
  statuses: Record<string, number>;
  seconds: number;
  latencyMs: LatencySummary;
  /** Each answered request's latency in ms (sorted), for summaries over several runs (bench-interleaved.ts). */
  ackLatencies: Float64Array;
  /** The run ended because the prepared events ran out, not because time was up. */
  ranOut: boolean;
}

export function prepareEvents(count: number, secret: string, make: (i: number) => { id: string }): PreparedEvent[] {
  return Array.from({ length: count }, (_, i) => {
    const event = make(i);
    const body = Buffer.from(JSON.stringify(event));
    return { id: event.id, body, signature: signBody(body, secret) };
  });
}

/** Nearest-rank percentiles over the first `count` entries (sorts them in place). */
export function summarize(samples: Float64Array, count: number): LatencySummary {
  const sorted = samples.subarray(0, count).sort();
  const at = (q: number): number => (count === 0 ? 0 : sorted[Math.min(count - 1, Math.ceil(q * count) - 1)]);
  let sum = 0;
  for (let i = 0; i < count; i++) sum += sorted[i];
  return { count, mean: count ? sum / count : 0, p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999), max: count ? sorted[count - 1] : 0 };
}

/** `keep-alive`: each lane reuses its connection; `per-event`: a new TCP connection per webhook (as many senders do). */
export type ConnectionMode = 'keep-alive' | 'per-event';

export class WebhookPoster {
  readonly agent: Agent;
  private readonly url: URL;

  constructor(engineUrl: string, sockets: number, mode: ConnectionMode = 'keep-alive') {
    this.url = new URL('/webhooks', engineUrl);
    // Without keep-alive the request says `Connection: close`: the server closes after answering.
    this.agent = mode === 'keep-alive'
      ? new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets })
      : new Agent({ keepAlive: false, maxSockets: sockets });
  }

  /** Resolves with the HTTP status, or 0 when the request failed on the wire. */
  post(event: PreparedEvent): Promise<number> {
    return new Promise((resolve) => {
      const req = request(
        {
          agent: this.agent,
          hostname: this.url.hostname,
          port: this.url.port,
          path: this.url.pathname,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': event.body.length,
            'x-service-signature': event.signature,
          },
        },
        (res) => {
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(0));
          res.resume();
        },
      );
      req.on('error', () => resolve(0));
      req.end(event.body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * `connections` lanes, each sending its next event as soon as the previous one
 * is answered (a closed loop: the rate is whatever the engine acknowledges).
 */
export async function closedLoop(poster: WebhookPoster, events: PreparedEvent[], connections: number, durationMs: number): Promise<ClosedLoopResult> {
  const latencies = new Float64Array(events.length);
  const sentAt = new Float64Array(events.length);
  const statusOf = new Uint16Array(events.length);
  const statuses: Record<string, number> = {};
  let next = 0;
  let done = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const lane = async (): Promise<void> => {
    while (next < events.length && performance.now() < deadline) {
      const i = next++;
      const t0 = performance.now();
      sentAt[i] = performance.timeOrigin + t0;
      const status = await poster.post(events[i]);
      latencies[done++] = performance.now() - t0;
      statusOf[i] = status;
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: connections }, lane));
  const seconds = (performance.now() - started) / 1000;
  const latencyMs = summarize(latencies, done);
  return { sent: next, sentAt, statusOf, statuses, seconds, latencyMs, ackLatencies: latencies.subarray(0, done), ranOut: next >= events.length };
}

export interface OpenLoopResult {
  /** Per event: epoch milliseconds (sub-millisecond precision) at which it was due, and its HTTP status. */
  sentAt: Float64Array;
  statusOf: Uint16Array;
  statuses: Record<string, number>;
  ackLatencyMs: LatencySummary;
  seconds: number;
  /** The latest the load generator sent an event after it was due (a busy generator shows here, not as the server's latency only). */
  maxSendLagMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends at a fixed rate whatever the answers do (an open loop), so a slow
 * engine shows up as latency instead of silently lowering the offered load.
 */
export async function openLoop(poster: WebhookPoster, events: PreparedEvent[], ratePerSecond: number): Promise<OpenLoopResult> {
  const sentAt = new Float64Array(events.length);
  const statusOf = new Uint16Array(events.length);
  const statuses: Record<string, number> = {};
  const acks = new Float64Array(events.length);
  let acked = 0;
  let maxSendLagMs = 0;
  const inFlight: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < events.length; i++) {
    const due = started + (i * 1000) / ratePerSecond;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    // The moment it was due: time spent queued for a connection counts against the server.
    const now = performance.now();
    maxSendLagMs = Math.max(maxSendLagMs, now - due);
    const t0 = Math.min(due, now);
    sentAt[i] = performance.timeOrigin + t0;
    inFlight.push(poster.post(events[i]).then((status) => {
      acks[acked++] = performance.now() - t0;
      statusOf[i] = status;
      statuses[status] = (statuses[status] ?? 0) + 1;
    }));
  }
  await Promise.all(inFlight);
  return { sentAt, statusOf, statuses, ackLatencyMs: summarize(acks, acked), seconds: (performance.now() - started) / 1000, maxSendLagMs };
}
