/**
 * Several engine processes ("replicas", SPEC sections 10 and 12) on one fresh
 * PostgreSQL database, with one simulator, wired as a deployment would be: the
 * simulator's webhooks go through a round-robin balancer to the live replicas
 * (replica-routing.ts), and each replica calls the simulator through a proxy
 * of its own that notes what it sent. The test's own events are spread over
 * the live replicas round robin too.
 *
 *   const set = useReplicas({ count: 3, rules: [followUp] });   // once for the describe block
 *
 *   it('…', async () => {
 *     await set.deliverAll(events);              // every event acknowledged by some replica
 *     await set.kill(1);                         // SIGKILL; set.restart(1) brings it back on its port
 *     await set.settle();                        // nothing left to do anywhere
 *     …set.requests('POST', /^\/v1\/tasks$/)…    // what the replicas sent, at the simulator
 *   });
 *
 * A replica being stopped is taken out of the balancer before its signal is
 * sent, as an operator drains it from a load balancer first.
 */
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/simulator.js';
import { notYet, unfinishedWork } from './admin.js';
import { createPostgresDatabase, withPostgresClient, type TestDatabase } from './databases.js';
import { rulesDir, spawnEngine, TEST_SECRET, type EngineProcess } from './engine.js';
import { deliver, type TestEvent } from './events.js';
import { HOOK_TIMEOUT_MS, type Env } from './fixture.js';
import { startBalancer, startRecordingProxy, type Listening, type SentRequest } from './replica-routing.js';
import { onFreePort } from './ports.js';
import { engineRequests } from './round-trip.js';
import { waitUntil } from './wait.js';

export type { SentRequest } from './replica-routing.js';

export interface ReplicaOptions {
  count: number;
  /** Rule definitions, written once to a folder all replicas read. */
  rules: unknown[];
  /** Environment of every replica, over the set's own (database, service, rules, LOG_LEVEL=warn). */
  env?: Env;
  simulator?: SimulatorOptions;
}

export interface Replica {
  readonly index: number;
  /** Chosen at its first start, kept for its restarts. */
  port: number;
  /** The running process; undefined while it is stopped. */
  process?: EngineProcess;
  /** Every process this replica ran, the current one last (their output, for a failure's message). */
  readonly generations: EngineProcess[];
}

export interface ReplicaSet {
  readonly db: TestDatabase;
  readonly sim: Simulator;
  readonly replicas: readonly Replica[];
  /** Every request any replica sent to the simulator, with the replica that sent it, in arrival order. */
  readonly sent: readonly SentRequest[];
  /** The running replicas. */
  live(): EngineProcess[];
  /** A running replica, for admin reads (they all read the one database). */
  any(): EngineProcess;
  /** Takes replica `i` out of the balancer and sends it `signal`; resolves with the epoch ms of the signal once it has exited. */
  stop(i: number, signal?: NodeJS.Signals): Promise<number>;
  /** Starts replica `i` again on its port and puts it back in the balancer. */
  restart(i: number): Promise<EngineProcess>;
  /** Delivers each event to the next live replica until one acknowledges it (202, or 200 as a duplicate). */
  deliverAll(events: TestEvent[], options?: DeliverOptions): Promise<void>;
  /** The simulator's log of requests the engines sent. */
  requests(method: string, path: RegExp): ReturnType<typeof engineRequests>;
  /** Resolves once nothing is left to do: no webhook to deliver, no work in the database, the simulator's log still. */
  settle(timeoutMs?: number): Promise<void>;
  /** A query on the replicas' database, from the test. */
  sql<T>(text: string, params?: unknown[]): Promise<T[]>;
}

export interface DeliverOptions {
  /** Concurrent senders (default 8). */
  senders?: number;
  /** Called after each acknowledgement with the number acknowledged so far and the event. */
  onAck?(acknowledged: number, event: TestEvent): void;
}

interface Parts {
  db: TestDatabase;
  sim: Simulator;
  balancer: Listening;
  proxies: Listening[];
  rules: string;
  replicas: Replica[];
  sent: SentRequest[];
}

function replicaEnv(parts: Parts, i: number, env: Env): Env {
  return { DATABASE_URL: parts.db.url, SERVICE_API_URL: `${parts.proxies[i].url}/v1`, RULES_DIR: parts.rules, LOG_LEVEL: 'warn', ...env };
}

async function startParts(options: ReplicaOptions, cleanups: Array<() => unknown>): Promise<Parts> {
  const db = await createPostgresDatabase();
  cleanups.push(() => db.drop());
  const replicas: Replica[] = [];
  for (let index = 0; index < options.count; index++) replicas.push({ index, port: 0, generations: [] });
  const live = () => replicas.filter((r) => r.process).map((r) => r.process!.url);
  const balancer = await startBalancer(live);
  cleanups.push(() => balancer.close());
  const sim = await startSimulator({
    seed: true, webhookUrl: `${balancer.url}/webhooks`, webhookSecret: TEST_SECRET, webhookRetryDelaysMs: [100, 300, 1000, 3000], ...options.simulator,
  });
  cleanups.push(() => sim.close());
  const sent: SentRequest[] = [];
  const proxies: Listening[] = [];
  for (const r of replicas) {
    const proxy = await startRecordingProxy(r.index, sim.origin, sent);
    cleanups.push(() => proxy.close());
    proxies.push(proxy);
  }
  return { db, sim, balancer, proxies, rules: rulesDir(options.rules), replicas, sent };
}

async function spawnReplica(parts: Parts, replica: Replica, env: Env, cleanups: Array<() => unknown>): Promise<EngineProcess> {
  const spawn = (port: number) => spawnEngine(replicaEnv(parts, replica.index, env), port);
  let engine: EngineProcess;
  if (replica.generations.length > 0) engine = await spawn(replica.port);
  else ({ started: engine, port: replica.port } = await onFreePort(spawn)); // its first start: any port, kept for its restarts
  cleanups.push(() => engine.kill('SIGKILL'));
  replica.generations.push(engine);
  replica.process = engine;
  return engine;
}

/** Sends each event to the next live replica until one acknowledges it; a replica going down is skipped. */
async function deliverSpread(set: Pick<ReplicaSet, 'live'>, events: TestEvent[], options: DeliverOptions): Promise<void> {
  const queue = [...events];
  let next = 0;
  let acknowledged = 0;
  const sender = async () => {
    for (let event = queue.shift(); event; event = queue.shift()) {
      for (let tries = 0; ; tries++) {
        const targets = set.live();
        if (tries > 200) throw new Error(`no replica acknowledged ${event.id} (${targets.length} live)`);
        const target = targets[next++ % Math.max(1, targets.length)];
        const status = target ? await deliver(target.url, event).then((res) => res.status, () => 0) : 0;
        if (status === 202 || status === 200) break;
        // 0: it went down under the request; 503: it is stopping or its database is away. Anything else is a bug.
        if (status !== 0 && status !== 503) throw new Error(`delivery of ${event.id} to ${target?.url} answered ${status}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      options.onAck?.(++acknowledged, event);
    }
  };
  await Promise.all(Array.from({ length: options.senders ?? 8 }, sender));
}

/** No webhook pending, the database holds no unfinished work, and the simulator's logs unchanged between two looks. */
async function settle(parts: Parts, any: () => EngineProcess, timeoutMs: number): Promise<void> {
  let last = '';
  await waitUntil(
    async () => {
      const deliveries = parts.sim.webhooks.filter((w) => w.state === 'pending').length;
      if (deliveries > 0) notYet(`the simulator has ${deliveries} webhook(s) to deliver`);
      const left = await unfinishedWork(any());
      if (left.length > 0) notYet(`the replicas have ${left.join(', ')}`);
      const waiting = parts.sent.filter((r) => r.answeredAt === undefined).length;
      if (waiting > 0) notYet(`${waiting} request(s) to the simulator unanswered`);
      const mark = `${parts.sim.requests.length} request(s) and ${parts.sim.webhooks.length} webhook(s) at the simulator`;
      const stable = mark === last;
      last = mark;
      return stable || notYet(`${mark}, not yet seen twice in a row`);
    },
    { timeoutMs, intervalMs: 100, what: 'the replicas and the simulator to go quiet' },
  );
}

function replicaSet(current: () => Parts, env: Env, cleanups: Array<() => unknown>): ReplicaSet {
  const set: ReplicaSet = {
    get db() { return current().db; },
    get sim() { return current().sim; },
    get replicas() { return current().replicas; },
    get sent() { return current().sent; },
    live: () => current().replicas.filter((r) => r.process).map((r) => r.process!),
    any: () => set.live()[0] ?? notYet('no replica is running'),
    async stop(i, signal = 'SIGKILL') {
      const replica = current().replicas[i];
      const engine = replica.process ?? notYet(`replica ${i} is not running`);
      replica.process = undefined;
      const at = Date.now();
      await engine.kill(signal);
      return at;
    },
    restart: (i) => spawnReplica(current(), current().replicas[i], env, cleanups),
    deliverAll: (events, options = {}) => deliverSpread(set, events, options),
    requests: (method, path) => engineRequests(current().sim, method, path),
    settle: (timeoutMs = 20_000) => settle(current(), set.any, timeoutMs),
    sql: (text, params = []) => withPostgresClient(current().db.url, async (c) => (await c.query(text, params)).rows),
  };
  return set;
}

/**
 * Starts the set before the first test of the describe block it is called in
 * (the first replica alone, so it runs the migrations; the others together)
 * and stops everything after its last test, the processes first.
 */
export function useReplicas(options: ReplicaOptions): ReplicaSet {
  const cleanups: Array<() => unknown> = [];
  const env = options.env ?? {};
  let parts: Parts | undefined;
  const current = () => parts ?? notYet('the replica set runs only while a test of its describe block does');
  beforeAll(async () => {
    const started = await startParts(options, cleanups);
    await spawnReplica(started, started.replicas[0], env, cleanups);
    await Promise.all(started.replicas.slice(1).map((r) => spawnReplica(started, r, env, cleanups)));
    parts = started;
  }, HOOK_TIMEOUT_MS * 2);
  afterAll(async () => {
    parts = undefined;
    const failures: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve().then(cleanup).catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw failures[0];
  }, HOOK_TIMEOUT_MS);
  return replicaSet(current, env, cleanups);
}

/** What every replica printed, for a failure's message. */
export function replicaOutput(set: ReplicaSet): string {
  return set.replicas.map((r) => r.generations.map((g, n) => `--- replica ${r.index} (run ${n + 1}) ---\n${g.output.join('').slice(-4000)}`).join('\n')).join('\n');
}
