/**
 * The main path end to end: a signed webhook in, a rule matched, the action's
 * request at the simulator, over real HTTP, on every database under test.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver, waitFor } from './support/events.js';

const followUp = {
  id: 'follow-up',
  name: 'Follow-up review',
  on: 'task.completed',
  conditions: { all: [{ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' }] },
  actions: [
    { id: 'review', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } },
  ],
};

const kinds = await databasesUnderTest('pipeline');

describe.each(kinds)('the main path on $name', (kind) => {
  let db: TestDatabase;
  let sim: Simulator;
  let engine: RunningEngine;

  async function start(env: Record<string, string> = {}, rules: unknown[] = [followUp]) {
    engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir(rules), ...env });
  }

  beforeEach(async () => {
    db = await kind.create();
    sim = await startSimulator({ seed: true });
  });

  afterEach(async () => {
    await engine?.stop();
    await sim.close();
    await db.drop();
  });

  const createdTasks = () => sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201);

  it('creates the follow-up task at the service with the rendered title', async () => {
    await start();
    const event = aTaskEvent('task.completed', { title: 'Ship 1.0' });
    const res = await deliver(engine.url, event);
    expect(res.status).toBe(202);
    expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
    const [request] = await waitFor(() => createdTasks().length === 1 && createdTasks(), 10_000, 'the follow-up task');
    expect(request.body).toMatchObject({ project_id: 'prj_1', title: 'Review: Ship 1.0' });
    expect(request.idempotencyKey).toEqual(expect.any(String));
    const detail = await waitFor(async () => {
      const answer = await body(engine.admin(`/admin/events/${event.id}`));
      return answer.executions?.[0]?.status === "succeeded" && answer;
    });
    expect(detail.status).toBe('processed');
    expect(detail.rules[0]).toMatchObject({ rule: 'follow-up', outcome: 'matched' });
    expect(detail.executions[0].actions[0]).toMatchObject({ type: 'task.create', status: 'succeeded', attempts: 1 });
  });

  it('explains why a rule did not fire', async () => {
    await start();
    const event = aTaskEvent('task.completed', { project_id: 'prj_2' });
    await deliver(engine.url, event);
    const detail = await waitFor(async () => {
      const answer = await body(engine.admin(`/admin/events/${event.id}`));
      return answer.status !== "received" && answer;
    });
    expect(detail.status).toBe('ignored');
    expect(detail.executions).toEqual([]);
    expect(detail.rules).toEqual([
      expect.objectContaining({
        rule: 'follow-up',
        outcome: 'not_matched',
        conditions: [expect.objectContaining({ path: '$.data.task.project_id', operator: 'equal', value: 'prj_1', factValue: 'prj_2', result: false })],
      }),
    ]);
    expect(createdTasks()).toHaveLength(0);
  });

  it('acts once for a duplicate delivery', async () => {
    await start();
    const event = aTaskEvent('task.completed');
    expect((await deliver(engine.url, event)).status).toBe(202);
    const again = await deliver(engine.url, event);
    expect(again.status).toBe(200);
    expect(await body(again)).toEqual({ id: event.id, status: 'duplicate' });
    await waitFor(() => createdTasks().length === 1, 10_000, 'one task');
    await new Promise((r) => setTimeout(r, 500));
    expect(createdTasks()).toHaveLength(1);
  });
});
