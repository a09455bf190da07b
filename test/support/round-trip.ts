/**
 * The engine and the simulator wired both ways, as in production: the engine
 * calls the simulator's API, and the simulator sends a signed webhook back to
 * the engine for every change, so an engine action can cause the next event.
 *
 * The simulator's webhook URL is fixed when it starts and the engine's port is
 * known only once it listens, so a port is reserved for the simulator first, the
 * engine is started pointing at it, and then the simulator takes that port (or,
 * when another process took it meanwhile, all of it starts again on another).
 */
import { createServer as createHttpServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/simulator.js';
import { USER_AGENT } from '../../src/actions/service-client.js';
import { notYet, unfinishedWork } from './admin.js';
import { startEngine, TEST_SECRET, type RunningEngine } from './engine.js';
import { onFreePort } from './ports.js';
import { waitUntil } from './wait.js';

export interface RoundTrip {
  engine: RunningEngine;
  sim: Simulator;
  /** Stops all of it. */
  stop(): Promise<void>;
}

export interface RoundTripOptions extends SimulatorOptions {
  /**
   * Holds each answer of the service this long on its way back to the engine
   * (the change is made and its webhook sent at once), so the webhook about a
   * change reliably arrives before the engine learns the answer to its request.
   */
  answerDelayMs?: number;
  /** Only the first this many answers are held back (default: all). */
  slowAnswers?: number;
}

/**
 * Starts the engine (in this process) and a simulator whose webhooks go to it. The simulator's port is chosen before
 * the engine starts (the engine is told where the service is) and taken after: when another process took it meanwhile,
 * all of it starts again on another port (ports.ts).
 */
export async function startRoundTrip(env: Record<string, string | undefined>, options: RoundTripOptions = {}): Promise<RoundTrip> {
  return (await onFreePort((simPort) => startRoundTripOn(simPort, env, options))).started;
}

async function startRoundTripOn(simPort: number, env: Record<string, string | undefined>, options: RoundTripOptions): Promise<RoundTrip> {
  const { answerDelayMs, slowAnswers, ...simOptions } = options;
  const proxy = answerDelayMs === undefined ? undefined : await startSlowAnswers(simPort, answerDelayMs, slowAnswers ?? Infinity);
  const apiPort = proxy ? (proxy.address() as { port: number }).port : simPort;
  const closeProxy = () => new Promise<void>((resolve) => (proxy ? (proxy.closeAllConnections(), proxy.close(() => resolve())) : resolve()));
  const engine = await startEngine({ SERVICE_API_URL: `http://127.0.0.1:${apiPort}/v1`, ...env });
  try {
    const sim = await startSimulator({
      seed: true,
      port: simPort,
      webhookUrl: `${engine.url}/webhooks`,
      webhookSecret: TEST_SECRET,
      webhookRetryDelaysMs: [100, 300, 1000],
      ...simOptions,
    });
    return {
      engine,
      sim,
      stop: async () => {
        await engine.stop();
        await sim.close();
        await closeProxy();
      },
    };
  } catch (error) {
    await engine.stop();
    await closeProxy();
    throw error;
  }
}

/** A proxy to the simulator that forwards each request at once and delays only the answer. */
async function startSlowAnswers(simPort: number, delayMs: number, count: number): Promise<Server> {
  let held = 0;
  const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    const delay = held++ < count ? delayMs : 0;
    const upstream = request(
      { host: '127.0.0.1', port: simPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          setTimeout(() => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(chunks));
          }, delay);
        });
      },
    );
    upstream.on('error', () => {
      res.writeHead(502, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'bad_gateway', message: 'simulator unreachable' } }));
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Requests the engine sent to the simulator (a test's own calls use another User-Agent). */
export function engineRequests(sim: Simulator, method: string, pathPattern: RegExp) {
  return sim.requests.filter((r) => r.userAgent === USER_AGENT && r.method === method && pathPattern.test(r.path));
}

/** Tasks the engine created at the simulator (answered 201). */
export function tasksCreatedByEngine(sim: Simulator) {
  return engineRequests(sim, 'POST', /^\/v1\/tasks\/?$/).filter((r) => r.status === 201);
}

/** A task created at the service by a person (not the engine): the service reports it with a webhook. */
export async function createTaskAsAPerson(sim: Simulator, fields: Record<string, unknown>): Promise<{ id: string; [k: string]: unknown }> {
  const res = await fetch(`${sim.url}/tasks`, {
    method: 'POST',
    headers: { Authorization: 'Bearer ac_test_a_person_using_the_app', 'Content-Type': 'application/json', 'User-Agent': 'web-app/1.0' },
    body: JSON.stringify(fields),
  });
  if (res.status !== 201) throw new Error(`creating a task answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { id: string };
}

/** A task changed at the service by a person. */
export async function updateTaskAsAPerson(sim: Simulator, id: string, patch: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${sim.url}/tasks/${id}`, {
    method: 'PATCH',
    headers: { Authorization: 'Bearer ac_test_a_person_using_the_app', 'Content-Type': 'application/json', 'User-Agent': 'web-app/1.0' },
    body: JSON.stringify(patch),
  });
  if (res.status !== 200) throw new Error(`updating task ${id} answered ${res.status}: ${await res.text()}`);
}

/**
 * Resolves once nothing is left to happen: the simulator has no webhook to
 * deliver and no workflow run going, the engine has no event to evaluate and no
 * action run or execution unfinished, and the logs have not grown between two
 * such observations. A finished action run's webhook is queued at the simulator
 * before the engine can record the run, and a delivered webhook's event is
 * committed before the simulator sees the answer, so there is no gap in which
 * both sides look idle while work is still in transit.
 */
export async function quiescence({ engine, sim }: RoundTrip, timeoutMs = 20_000): Promise<void> {
  let last = '';
  await waitUntil(
    async () => {
      const deliveries = sim.webhooks.filter((w) => w.state === 'pending').length;
      if (deliveries > 0) notYet(`the simulator has ${deliveries} webhook(s) to deliver`);
      if (!(await isIdle(sim))) notYet('the simulator has a workflow run or a delivery going');
      const left = await unfinishedWork(engine);
      if (left.length > 0) notYet(`the engine has ${left.join(', ')}`);
      if (!(await isIdle(sim))) notYet('the simulator has a workflow run or a delivery going');
      const mark = `${sim.requests.length} request(s) and ${sim.webhooks.length} webhook(s) at the simulator`;
      const stable = mark === last;
      last = mark;
      return stable || notYet(`${mark}, not yet seen twice in a row`);
    },
    { timeoutMs, what: 'the engine and the simulator to go quiet' },
  );
}

async function isIdle(sim: Simulator): Promise<boolean> {
  try {
    await sim.waitForIdle(1);
    return true;
  } catch {
    return false;
  }
}
