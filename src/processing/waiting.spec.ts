import { Logger } from '@nestjs/common';
import { statementsOf } from '../database/statements.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { taskEvent, useCoreWithSimulator } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { actionRunId } from './new-action-run.js';
import { cancelExecution, resumeExecution } from './waiting.js';

const kinds = await databasesUnderTest('waiting executions');

const HOUR = 3_600_000;

/** A completed task is followed up an hour later. */
const followUpLater = aRule({
  id: 'follow-up-later',
  actions: [
    { type: 'delay', params: { duration: 'PT1H' } },
    { type: 'task.create', params: { project_id: 'prj_1', title: 'Follow-up: {{ event.data.task.title }}' } },
  ],
  options: { cancelOn: ['task.updated'] },
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('waiting executions on $name', (kind) => {
  const rig = useCoreWithSimulator(kind);
  const core = () => rig.core;

  async function waitingFor(title = 'Write docs', task = {}) {
    core().useRules(followUpLater);
    const event = taskEvent('task.completed', { title, ...task });
    await core().store(event);
    await core().processNext();
    const [execution] = await core().executions(event.id);
    return { event, execution: execution! };
  }

  const cancel = (id: string) => core().db.write((m) => cancelExecution(statementsOf(m), id, 'admin', core().clock.now().toISOString()));
  const resume = (id: string) => core().db.write((m) => resumeExecution(statementsOf(m), id, core().clock.now().toISOString()));
  const noneDue = async () => expect(await core().queue.claimActionRuns(10, 1_000)).toEqual([]);

  it('holds a delay as a row due at resume_at, and nothing is due before', async () => {
    const { execution } = await waitingFor();
    const resumeAt = new Date(core().clock.now().getTime() + HOUR).toISOString();
    expect(execution).toMatchObject({ status: 'waiting', resumeAt });
    const [delay] = await core().runs(execution.id);
    expect(delay).toMatchObject({ type: 'delay', status: 'pending', nextAttemptAt: resumeAt, resourceKey: null });
    core().clock.advance(HOUR - 1);
    await noneDue();
  });

  it('resumes once when due, however long overdue, and goes on with the next entry', async () => {
    const { execution } = await waitingFor();
    core().clock.advance(50 * HOUR); // the engine was down far longer than the delay
    expect(await core().performNext()).toMatchObject({ status: 'succeeded' });
    expect((await core().executions(execution.eventId))[0]).toMatchObject({ status: 'running', resumeAt: null });
    expect(await core().performNext()).toMatchObject({ status: 'succeeded' });
    expect((await core().executions(execution.eventId))[0]!.status).toBe('succeeded');
    expect(rig.sim.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
    await noneDue();
  });

  it('a cancel that comes first wins over the resume: the due run records that it was cancelled, nothing is sent', async () => {
    const { execution } = await waitingFor();
    core().clock.advance(HOUR);
    const [claim] = await core().queue.claimActionRuns(1, 10_000);
    expect(await cancel(execution.id)).toBe(true);
    expect(await core().runner.perform(claim!, core().queue.owner)).toBe('cancelled');
    expect((await core().executions(execution.eventId))[0]).toMatchObject({ status: 'cancelled', cancelledBy: 'admin' });
    expect((await core().runs(execution.id)).map((r) => [r.type, r.status])).toEqual([['delay', 'cancelled']]);
    expect(rig.sim.requests).toEqual([]);
  });

  it('a resume that comes first wins over the cancel, which is refused', async () => {
    const { execution } = await waitingFor();
    core().clock.advance(HOUR);
    await core().performNext();
    expect(await cancel(execution.id)).toBe(false);
    expect((await core().executions(execution.eventId))[0]!.status).toBe('running');
  });

  it('an operator’s resume makes the delay due now; a resume of an execution that is not waiting is refused', async () => {
    const { execution } = await waitingFor();
    await noneDue();
    expect(await resume(execution.id)).toBe(true);
    expect(await core().performNext()).toMatchObject({ status: 'succeeded' });
    expect(await resume(execution.id)).toBe(false);
  });

  it('cancelOn: a later event about the same resource cancels it, one about another resource does not', async () => {
    const { event, execution } = await waitingFor('Mine', { id: 'tsk_mine' });
    const other = await waitingFor('Other', { id: 'tsk_other' });
    const update = taskEvent('task.updated', { id: 'tsk_mine' });
    await core().store(update);
    await core().processNext();
    expect((await core().executions(event.id))[0]).toMatchObject({ status: 'cancelled', cancelledBy: update.id });
    expect(JSON.parse((await core().event(update.id)).cancelled!)).toEqual([{ execution: execution.id, rule: 'follow-up-later' }]);
    expect((await core().executions(other.event.id))[0]!.status).toBe('waiting');
  });

  it('debounce: each matched event within the window replaces the waiting one; the last runs when its window is over', async () => {
    const settle = aRule({
      id: 'settle',
      on: 'task.updated',
      actions: [{ type: 'workflow.trigger', params: { id: 'wf_notify', input: { title: '{{ event.data.task.title }}' } } }],
      options: { debounce: { seconds: 60, key: '{{ event.data.task.id }}' } },
    });
    core().useRules(settle);
    const events = [];
    for (const title of ['a', 'b', 'c']) {
      const event = taskEvent('task.updated', { id: 'tsk_1', title });
      events.push(event);
      await core().store(event);
      await core().processNext();
      core().clock.advance(59_000);
      await noneDue();
    }
    const other = taskEvent('task.updated', { id: 'tsk_2', title: 'other key' });
    await core().store(other);
    await core().processNext();
    const [last] = await core().executions(events[2]!.id);
    for (const event of events.slice(0, 2)) expect((await core().executions(event.id))[0]).toMatchObject({ status: 'debounced', debouncedInto: last!.id });
    expect((await core().executions(other.id))[0]!.status).toBe('waiting');
    core().clock.advance(1_000);
    expect(await core().performNext()).toMatchObject({ claim: expect.objectContaining({ execution_id: last!.id, position: -1 }), status: 'succeeded' });
    expect(await core().performNext()).toMatchObject({ status: 'succeeded' });
    expect(rig.sim.requests.map((r) => r.body)).toEqual([{ title: 'c' }]);
  });

  it('forEach with more items than MAX_FOREACH_ITEMS fails with too_many_items before anything is sent', async () => {
    core().useRules(aRule({
      id: 'too-many',
      actions: [
        { type: 'task.update', forEach: '{{ event.data.task.ids }}', params: { id: '{{ item }}', title: 'x' } },
        { type: 'task.create', params: { project_id: 'prj_1', title: 'after' } },
      ],
    }));
    const event = taskEvent('task.completed', { ids: Array.from({ length: core().config.maxForEachItems + 1 }, (_, i) => `tsk_${i}`) });
    await core().store(event);
    await core().processNext();
    expect(await core().performNext()).toMatchObject({ status: 'failed' });
    const [execution] = await core().executions(event.id);
    expect(execution).toMatchObject({ status: 'failed' });
    expect((await core().runs(execution!.id)).map((r) => [r.type, r.status, r.errorCode, r.itemIndex])).toEqual([['task.update', 'failed', 'too_many_items', null]]);
    expect(rig.sim.requests).toEqual([]);
  });

  it('forEach items get keys of their own, derived from event, rule, position and index', () => {
    const event = { seq: 7, id: 'evt_1' };
    const keys = [0, 1, 2].map((index) => actionRunId(event, 'rule', 0, index));
    expect(new Set([...keys, actionRunId(event, 'rule', 0)]).size).toBe(4);
    expect(actionRunId(event, 'rule', 0, 1)).toBe(keys[1]);
    expect(actionRunId(event, 'rule', 1, 0)).not.toBe(keys[0]);
  });
});
