/**
 * Failures at the service, end to end: what is retried, what is waited out,
 * what fails at once and how an operator retries it, and dry-run.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver, waitFor } from './support/events.js';

const followUp = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } }],
};

const kinds = await databasesUnderTest('retries');

describe.each(kinds)('failures at the service on $name', (kind) => {
  let db: TestDatabase;
  let sim: Simulator;
  let engine: RunningEngine;

  beforeEach(async () => {
    db = await kind.create();
    sim = await startSimulator({ seed: true });
  });

  afterEach(async () => {
    await engine?.stop();
    await sim.close();
    await db.drop();
  });

  async function start(env: Record<string, string> = {}) {
    engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([followUp]), ...env });
  }

  const taskPosts = () => sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks');
  const created = () => [...sim.state.tasks.values()].filter((t) => String(t.title).startsWith('Review:'));

  async function runOf(eventId: string) {
    const detail = await body(engine.admin(`/admin/events/${eventId}`));
    return detail.executions?.[0]?.actions?.[0];
  }

  it('retries 500s and ends with exactly one created task', async () => {
    sim.setFaults({ script: [{ status: 500, count: 2, method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    const run = await waitFor(async () => ((await runOf(event.id!))?.status === 'succeeded' ? runOf(event.id!) : undefined), 15_000, 'success after retries');
    expect(run.attempts).toBe(3);
    expect(taskPosts().map((r) => r.status)).toEqual([500, 500, 201]);
    expect(new Set(taskPosts().map((r) => r.idempotencyKey)).size).toBe(1);
    expect(created()).toHaveLength(1);
  });

  it('waits out a 429 for its Retry-After', async () => {
    sim.setFaults({ script: [{ status: 429, retryAfter: 1, method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    await waitFor(async () => (await runOf(event.id!))?.status === 'succeeded', 15_000, 'success after 429');
    const [limited, ok] = taskPosts();
    expect(limited.status).toBe(429);
    expect(ok.status).toBe(201);
    expect(Date.parse(ok.time) - Date.parse(limited.time)).toBeGreaterThanOrEqual(950);
    expect(created()).toHaveLength(1);
  });

  it('fails a 400 at once, keeps its code, and retries it from the admin API', async () => {
    sim.setFaults({ script: [{ status: 400, code: 'bad_title', message: 'title is not allowed', method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    const failed = await waitFor(async () => ((await runOf(event.id!))?.status === 'failed' ? runOf(event.id!) : undefined), 10_000, 'the failure');
    expect(failed).toMatchObject({ attempts: 1, error: { code: 'bad_title', message: 'title is not allowed' } });
    const dead = await body(engine.admin('/admin/actions?status=failed'));
    expect(dead.items.map((r: { id: string }) => r.id)).toEqual([failed.id]);

    const retry = await engine.admin(`/admin/actions/${failed.id}/retry`, { method: 'POST' });
    expect(retry.status).toBe(200);
    await waitFor(async () => (await runOf(event.id!))?.status === 'succeeded', 10_000, 'the retried run');
    expect(created()).toHaveLength(1);
    const detail = await body(engine.admin(`/admin/events/${event.id!}`));
    expect(detail.executions[0].status).toBe('succeeded');
    const again = await engine.admin(`/admin/actions/${failed.id}/retry`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect((await body(again)).error.code).toBe('not_retryable');
  });

  it('sends nothing in dry-run and records the request it would have sent', async () => {
    await start({ DRY_RUN: 'true' });
    const event = aTaskEvent('task.completed', { title: 'Dry' });
    await deliver(engine.url, event);
    const run = await waitFor(async () => ((await runOf(event.id!))?.status === 'skipped' ? runOf(event.id!) : undefined), 10_000, 'the skipped run');
    expect(run.request).toMatchObject({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Dry' } });
    expect(sim.requests).toHaveLength(0);
  });
});
