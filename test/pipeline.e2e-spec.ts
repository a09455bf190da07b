/**
 * The main path end to end: a signed webhook in, a rule matched, the action's
 * request at the simulator, over real HTTP, on every database under test.
 */
import { quietEngine, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

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
  const rig = useRig(kind);
  let engine: RunningEngine;

  async function start() {
    engine = await rig.start([followUp]);
  }

  const createdTasks = () => rig.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201);

  it('creates the follow-up task at the service with the rendered title', async () => {
    await start();
    const event = aTaskEvent('task.completed', { title: 'Ship 1.0' });
    const res = await deliver(engine.url, event);
    expect(res.status).toBe(202);
    expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
    const [request] = await waitUntil(() => createdTasks().length === 1 && createdTasks(), { what: 'the follow-up task' });
    expect(request.body).toMatchObject({ project_id: 'prj_1', title: 'Review: Ship 1.0' });
    expect(request.idempotencyKey).toEqual(expect.any(String));
    const detail = await settledEvent(engine, event.id!);
    expect(detail.status).toBe('processed');
    expect(detail.executions.map((x: { status: string }) => x.status)).toEqual(['succeeded']);
    expect(detail.rules[0]).toMatchObject({ rule: 'follow-up', outcome: 'matched' });
    expect(detail.executions[0].actions[0]).toMatchObject({ type: 'task.create', status: 'succeeded', attempts: 1 });
  });

  it('explains why a rule did not fire', async () => {
    await start();
    const event = aTaskEvent('task.completed', { project_id: 'prj_2' });
    await deliver(engine.url, event);
    const detail = await settledEvent(engine, event.id!);
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
    const detail = await settledEvent(engine, event.id!);
    // Once the engine has nothing left to do, nothing more can reach the service: the counts are final.
    await quietEngine(engine);
    expect(detail.executions).toHaveLength(1);
    expect((await body(engine.admin('/admin/events'))).items.map((e: { id: string }) => e.id)).toEqual([event.id]);
    expect(rig.sim.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual(['POST /v1/tasks 201']);
  });
});
