/**
 * An in-memory stand-in for the Project and Task Management Service (SPEC
 * section 8), over real HTTP. End-to-end tests start it in-process and read its
 * logs directly; `npm run simulator` starts it from simulator/main.ts.
 *
 *   /v1/*     the service's API (simulator.api.ts, simulator.routes.ts)
 *   /_sim/*   control: logs, state, faults, reset, emit (simulator.control.ts)
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleApi } from './simulator.api.js';
import { handleControl } from './simulator.control.js';
import { SimulatorCore, type RequestLogEntry, type SimulatorOptions } from './simulator.core.js';
import type { FaultSettings, Faults } from './simulator.faults.js';
import { answerFromError, errorAnswer, send } from './simulator.http.js';
import type { SimulatorState } from './simulator.state.js';
import type { WebhookEvent, WebhookLogEntry } from './simulator.webhooks.js';
import { waitUntil } from '../wait.js';

export type { SimulatorOptions, RequestLogEntry } from './simulator.core.js';
export type { FaultSettings, Faults, ScriptEntry } from './simulator.faults.js';
export type { WebhookEvent, WebhookLogEntry } from './simulator.webhooks.js';
export type { Project, SimulatorState, Task, User, Workflow, WorkflowRun } from './simulator.state.js';

export interface Simulator {
  /** Base address including /v1, e.g. http://127.0.0.1:4010/v1. */
  readonly url: string;
  /** http://host:port, where /_sim/* lives. */
  readonly origin: string;
  readonly port: number;
  /** Every /v1 request, oldest first (live array). */
  readonly requests: readonly RequestLogEntry[];
  /** Every webhook event, with its delivery outcome (live array). */
  readonly webhooks: readonly WebhookLogEntry[];
  readonly state: SimulatorState;
  /** Idempotency key → number of state changes made under it (1 when honoured). */
  readonly effectsByIdempotencyKey: ReadonlyMap<string, number>;
  readonly faults: Readonly<Faults>;
  setFaults(settings: FaultSettings): void;
  /** Where webhooks go from now on (the demo learns its engine's port after the simulator is up). */
  setWebhookUrl(url: string): void;
  reset(): void;
  /** Sends a signed webhook with a fresh event id, as if the service had a change to report. */
  emit(type: string, data?: Record<string, unknown>): WebhookEvent;
  /** Resolves when no webhook delivery is queued or on the wire. */
  waitForWebhooksIdle(timeoutMs?: number): Promise<void>;
  /** Resolves when no workflow run is pending and no webhook delivery is left. */
  waitForIdle(timeoutMs?: number): Promise<void>;
  /** Resolves with the first finished delivery of this type (or matching this predicate). */
  waitForWebhook(match: string | ((entry: WebhookLogEntry) => boolean), timeoutMs?: number): Promise<WebhookLogEntry>;
  close(): Promise<void>;
}

const POLL_MS = 5;

function until<T>(check: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  return waitUntil(check, { timeoutMs, intervalMs: POLL_MS, what: `the simulator's ${what}` });
}

function dispatch(core: SimulatorCore) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    const path = url.pathname;
    let work: Promise<void>;
    if (path === '/v1' || path.startsWith('/v1/')) work = handleApi(core, req, res, url);
    else if (path.startsWith('/_sim/')) work = handleControl(core, req, res, url);
    else {
      req.resume();
      work = Promise.resolve(send(res, errorAnswer(404, 'not_found', `no route for ${req.method} ${path}`)));
    }
    work.catch((err: unknown) => send(res, answerFromError(err)));
  };
}

/** The address clients use: a wildcard listen address is reached over loopback. */
function clientHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** Listens on `host:port` (0: any free port) and resolves with the port taken. */
async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** The handle callers hold: live views of the core's logs and state, its waits, and a close. */
function simulatorHandle(core: SimulatorCore, server: Server, origin: string, port: number): Simulator {
  const finished = (e: WebhookLogEntry): boolean => e.state !== 'pending';
  return {
    url: `${origin}/v1`,
    origin,
    port,
    get requests() { return core.requests; },
    get webhooks() { return core.sender.log; },
    get state() { return core.state; },
    get effectsByIdempotencyKey() { return core.idempotency.effects; },
    get faults() { return core.faults; },
    setFaults: (settings) => core.setFaults(settings),
    setWebhookUrl: (url) => core.sender.sendTo(url),
    reset: () => core.reset(),
    emit: (type, data = {}) => core.emit(type, data),
    waitForWebhooksIdle: (timeoutMs = 5000) =>
      until(() => core.sender.idle, timeoutMs, 'webhook deliveries').then(() => undefined),
    waitForIdle: (timeoutMs = 5000) =>
      until(() => core.idle, timeoutMs, 'workflow runs and webhook deliveries').then(() => undefined),
    waitForWebhook: (match, timeoutMs = 5000) => {
      const test = typeof match === 'string' ? (e: WebhookLogEntry) => e.event.type === match : match;
      const what = typeof match === 'string' ? `a ${match} webhook` : 'a matching webhook';
      return until(() => core.sender.log.find((e) => finished(e) && test(e)), timeoutMs, what);
    },
    close: async () => {
      core.close();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const core = new SimulatorCore(options);
  const server = createServer(dispatch(core));
  const host = options.host ?? '127.0.0.1';
  const port = await listen(server, options.port ?? 0, host);
  return simulatorHandle(core, server, `http://${clientHost(host)}:${port}`, port);
}
