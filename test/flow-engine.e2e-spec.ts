/**
 * The in-memory flow engine `npm run bench` measures the engine against
 * (bench/flow-engine.ts: Node-RED's runtime running one flow), as the benchmark
 * runs it: built into dist-bench/ by bench/ensure-build.mjs, a process of its
 * own, sent signed webhooks over HTTP, its actions sent to the simulator. Its
 * figures mean something only if it does the work the engine does: refuse what
 * is not signed with the secret, answer at once, and create the follow-up task
 * (the benchmark's rule, bench-engine.ts BENCH_RULE) for the events the rule
 * matches, and for no other.
 */
import { execFileSync } from 'node:child_process';
import { signBody } from '../src/intake/signature.js';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { spawnEngine, TEST_API_KEY, TEST_SECRET, type EngineProcess } from './support/engine.js';
import { freePort } from './support/ports.js';
import { waitUntil } from './support/wait.js';

const FLOW_MAIN = 'dist-bench/bench/flow-engine.js';

describe("the benchmark's in-memory flow engine (Node-RED)", () => {
  let sim: Simulator;
  let flow: EngineProcess;
  let sent = 0;

  /** A webhook as the benchmark's load generator sends it (bench-events.ts), signed with `secret`. */
  const post = (event: object | string, secret = TEST_SECRET) => {
    const body = typeof event === 'string' ? event : JSON.stringify(event);
    return fetch(`${flow.url}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-signature': signBody(body, secret) },
      body,
    });
  };
  const task = (type: string, title: string) => {
    const id = `evt_flow_${++sent}`;
    return { id, type, created_at: new Date().toISOString(), data: { task: { id: `tsk_${id}`, project_id: 'prj_1', title, status: 'open' } } };
  };
  const created = () => sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks');
  /** The follow-up task of `eventId`, once the flow has created it (its Idempotency-Key names the event). */
  const followUpOf = (eventId: string) =>
    waitUntil(() => created().find((r) => r.idempotencyKey === `flow-${eventId}`), { timeoutMs: 10_000, intervalMs: 20, what: `the follow-up task of ${eventId}` });

  beforeAll(async () => {
    execFileSync(process.execPath, ['bench/ensure-build.mjs'], { stdio: 'ignore' });
    sim = await startSimulator({ seed: true });
    flow = await spawnEngine({ WEBHOOK_SECRET: TEST_SECRET, SERVICE_API_URL: sim.url, SERVICE_API_KEY: TEST_API_KEY }, await freePort(), { script: FLOW_MAIN, nodeArgs: [] });
  }, 300_000);

  afterAll(async () => {
    await flow?.kill('SIGTERM');
    await sim?.close();
  });

  it('answers a signed webhook 202 at once and creates the follow-up task of an event the rule matches', async () => {
    const event = task('task.created', 'Bench task 1');
    const res = await post(event);

    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ id: event.id, status: 'accepted' });
    const request = await followUpOf(event.id);
    expect(request.body).toEqual({ project_id: 'prj_1', title: `Follow-up ${event.id}` });
    expect(request.hasAuthorization).toBe(true);
    expect(request.keyMode).toBe('test');
    expect(request.status).toBe(201);
  });

  it('acts on no event the rule does not match: another type, another title', async () => {
    const before = created().length;
    const ignored = [task('task.updated', 'Bench task 2'), task('task.created', 'Routine update')];
    for (const event of ignored) expect((await post(event)).status).toBe(202);
    // Sent after them, through the same flow: once its task is created, theirs would have been too.
    const last = task('task.created', 'Bench task 3');
    expect((await post(last)).status).toBe(202);
    await followUpOf(last.id);

    expect(created().slice(before).map((r) => r.idempotencyKey)).toEqual([`flow-${last.id}`]);
  });

  it('refuses a webhook signed with another secret (401) or not JSON (400), and acts on neither', async () => {
    const before = created().length;
    const forged = await post(task('task.created', 'Bench forged'), 'not-the-secret');
    expect(forged.status).toBe(401);
    expect(await forged.json()).toEqual({ error: { code: 'invalid_signature' } });
    const garbled = await post('{"id": "evt_flow_garbled", "type": ');
    expect(garbled.status).toBe(400);
    expect(await garbled.json()).toEqual({ error: { code: 'invalid_event' } });

    const last = task('task.created', 'Bench task 4');
    expect((await post(last)).status).toBe(202);
    await followUpOf(last.id);
    expect(created().slice(before).map((r) => r.idempotencyKey)).toEqual([`flow-${last.id}`]);
  });
});
