/**
 * How a rule's actions run, end to end: in order, each seeing the responses of
 * the ones before it, and what a failure does to the actions after it.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { settledEvent } from './support/admin.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver } from './support/events.js';

const kinds = await databasesUnderTest('actions');

function threeSteps(continueOnError: boolean) {
  return {
    id: `three-steps-${continueOnError ? 'continue' : 'stop'}`,
    on: 'task.completed',
    actions: [
      { id: 'notes', type: 'task.create', params: { project_id: 'prj_1', title: 'Notes for {{ event.data.task.title }}' } },
      { id: 'invite', type: 'user.invite', continueOnError, params: { email: '{{ event.data.task.title | downcase }}@example.com' } },
      { type: 'workflow.trigger', params: { id: 'wf_notify', input: { notes_task_id: '{{ actions.notes.response.id }}', count: '{{ actions.notes.response.title | size }}' } } },
    ],
  };
}

describe.each(kinds)('a rule with several actions on $name', (kind) => {
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

  async function run(continueOnError: boolean) {
    engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([threeSteps(continueOnError)]) });
    sim.setFaults({ script: [{ status: 400, code: 'bad_email', message: 'not an address we invite', method: 'POST', pathPrefix: '/users' }] });
    const event = aTaskEvent('task.completed', { title: 'Launch' });
    await deliver(engine.url, event);
    return settledEvent(engine, event.id!, 15_000);
  }

  it('runs the actions in order, each seeing the responses of the ones before it', async () => {
    const detail = await run(true);
    const [notes, , trigger] = detail.executions[0].actions;
    expect(detail.executions[0].actions.map((a: { type: string }) => a.type)).toEqual(['task.create', 'user.invite', 'workflow.trigger']);
    expect(trigger.request.body).toEqual({ notes_task_id: notes.response.id, count: 'Notes for Launch'.length });
    const triggered = sim.requests.find((r) => r.path === '/v1/workflows/wf_notify/trigger');
    expect(triggered?.body).toEqual({ notes_task_id: notes.response.id, count: 16 });
  });

  it('goes on after a failed action marked continueOnError, and records the execution as failed', async () => {
    const detail = await run(true);
    const execution = detail.executions[0];
    expect(execution.actions.map((a: { status: string }) => a.status)).toEqual(['succeeded', 'failed', 'succeeded']);
    expect(execution.actions[1].error).toEqual({ code: 'bad_email', message: 'not an address we invite' });
    expect(execution.status).toBe('failed');
  });

  it('stops at a failed action without continueOnError: the actions after it never run', async () => {
    const detail = await run(false);
    const execution = detail.executions[0];
    expect(execution.actions.map((a: { status: string }) => a.status)).toEqual(['succeeded', 'failed']);
    expect(execution.status).toBe('failed');
    expect(execution.error).toMatch(/action invite \(user\.invite\) failed: bad_email/);
    expect(sim.requests.some((r) => r.path.includes('/workflows/'))).toBe(false);
  });
});
