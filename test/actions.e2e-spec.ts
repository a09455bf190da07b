/**
 * How a rule's actions run, end to end: in order, each seeing the responses of
 * the ones before it, and what a failure does to the actions after it.
 */
import { settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { aTaskEvent, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';

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
  const rig = useRig(kind);

  async function run(continueOnError: boolean) {
    const engine = await rig.start([threeSteps(continueOnError)]);
    rig.sim.setFaults({ script: [{ status: 400, code: 'bad_email', message: 'not an address we invite', method: 'POST', pathPrefix: '/users' }] });
    const event = aTaskEvent('task.completed', { title: 'Launch' });
    await deliver(engine.url, event);
    return settledEvent(engine, event.id!, 15_000);
  }

  it('runs the actions in order, each seeing the responses of the ones before it', async () => {
    const detail = await run(true);
    const [notes, , trigger] = detail.executions[0].actions;
    expect(detail.executions[0].actions.map((a: { type: string }) => a.type)).toEqual(['task.create', 'user.invite', 'workflow.trigger']);
    expect(trigger.request.body).toEqual({ notes_task_id: notes.response.id, count: 'Notes for Launch'.length });
    const triggered = rig.sim.requests.find((r) => r.path === '/v1/workflows/wf_notify/trigger');
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
    expect(rig.sim.requests.some((r) => r.path.includes('/workflows/'))).toBe(false);
  });
});
