/**
 * Loop protection end to end (SPEC section 6): the simulator reports every change
 * the engine makes with a signed webhook, exactly as the service does, so a rule
 * that reacts to the kind of change it makes feeds itself. Each test starts from
 * one change made by a person, lets everything run until nothing moves any more
 * (quiescence: nothing left on either side that could make another change),
 * and counts what happened.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { copyNewTasks } from './support/rules-harness.js';
import type { RunningEngine } from './support/engine.js';
import { body } from './support/events.js';
import { useRig } from './support/fixture.js';
import {
  createTaskAsAPerson, engineRequests, quiescence, tasksCreatedByEngine, updateTaskAsAPerson, type RoundTrip, type RoundTripOptions,
} from './support/round-trip.js';

/** A: a new open task is started (task.created → task.update, reported as task.updated). */
function startNewTasks(allowSelfTriggered: boolean) {
  return {
    id: 'start-new-tasks',
    name: 'Start every new task',
    on: 'task.created',
    conditions: { all: [{ fact: 'event', path: '$.data.task.status', operator: 'equal', value: 'open' }] },
    actions: [{ type: 'task.update', params: { id: '{{ event.data.task.id }}', status: 'in_progress' } }],
    options: { allowSelfTriggered },
  };
}

/** B: a started task gets a follow-up (task.updated → task.create, reported as task.created, which A starts…). */
function followUpStartedTasks(allowSelfTriggered: boolean) {
  return {
    id: 'follow-up-started-tasks',
    name: 'Follow up every started task',
    on: 'task.updated',
    conditions: { all: [{ fact: 'event', path: '$.data.task.status', operator: 'equal', value: 'in_progress' }] },
    actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Follow-up: {{ event.data.task.title }}' } }],
    options: { allowSelfTriggered },
  };
}

const kinds = await databasesUnderTest('loops');

describe.each(kinds)('loop protection on $name', (kind) => {
  const rig = useRig(kind, { simulator: false });
  let both: RoundTrip;
  let engine: RunningEngine;
  let sim: Simulator;

  async function start(rules: unknown[], env: Record<string, string> = {}, options: RoundTripOptions = {}) {
    both = await rig.roundTrip(rules, env, options);
    ({ engine, sim } = both);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function eventsOfType(type: string): Promise<any[]> {
    return (await allPages(engine, `/admin/events?type=${type}`, 500)).items.reverse(); // oldest first
  }

  const eventAbout = async (type: string, taskId: string) => (await eventsOfType(type)).find((e) => e.resource === `task:${taskId}`);
  const detail = (eventId: string) => body(engine.admin(`/admin/events/${encodeURIComponent(eventId)}`));

  async function loopsBlockedMetric(): Promise<number> {
    const text = await (await fetch(`${engine.url}/metrics`)).text();
    const line = /^engine_loops_blocked_total (\d+(?:\.\d+)?)$/m.exec(text);
    if (!line) throw new Error(`engine_loops_blocked_total is missing from /metrics:\n${text}`);
    return Number(line[1]);
  }

  /**
   * Nothing more can happen (a loop would go on): quiescence holds again, with
   * the counts the test saw, every request answered and every webhook
   * delivered. Quiet is a fixed point: with no webhook left to deliver and no
   * event, execution or action run unfinished, nothing is left that could
   * cause another change, so no waiting "a little longer" can show more.
   */
  async function expectNothingMoreHappens() {
    const counts = async () => ({ requests: sim.requests.length, webhooks: sim.webhooks.length, events: (await eventsOfType('task.created')).length });
    const before = await counts();
    await quiescence(both);
    expect(await counts()).toEqual(before);
    expect(sim.requests.filter((r) => r.status === undefined)).toEqual([]);
    expect(sim.webhooks.filter((w) => w.state !== 'delivered').map((w) => [w.event.type, w.state])).toEqual([]);
  }

  describe('a rule that creates a task on task.created', () => {
    it('acts once for a person’s task and ignores the event about the task it created itself', async () => {
      await start([copyNewTasks(false)]);
      const task = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
      await quiescence(both);

      const outside = await eventAbout('task.created', task.id);
      expect(outside).toMatchObject({ status: 'processed', depth: 0 });
      const copyId = (await detail(outside.id)).executions[0].actions[0].response.id;
      const own = await eventAbout('task.created', copyId);
      expect(own).toMatchObject({ status: 'ignored', depth: 1 });
      const explained = await detail(own.id);
      expect(explained.rules).toEqual([expect.objectContaining({ rule: 'copy-new-tasks', outcome: 'ignored_self_caused' })]);
      expect(explained.executions).toEqual([]);
      expect(await eventsOfType('task.created')).toHaveLength(2);
      expect(tasksCreatedByEngine(sim).map((r) => r.body)).toEqual([{ project_id: 'prj_1', title: 'Copy of Plan the sprint' }]);

      await expectNothingMoreHappens();
      expect(await loopsBlockedMetric()).toBe(0);
    });

    it('recognises its own task even when the service’s webhook about it arrives before the service’s answer', async () => {
      // The service reports a change as it makes it; its answer can reach the engine later than that report.
      await start([copyNewTasks(false)], {}, { answerDelayMs: 300 });
      await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
      // If the engine mistakes its own task for a person's, it copies copies without end: give up waiting
      // after a while and let the assertions below show the chain.
      await quiescence(both, 6000).catch(() => undefined);

      const created = await eventsOfType('task.created');
      expect(created.slice(0, 4).map((e) => [e.depth, e.status])).toEqual([[0, 'processed'], [1, 'ignored']]);
      expect(tasksCreatedByEngine(sim)).toHaveLength(1);
      await expectNothingMoreHappens();
    });

    it('recognises its own task when its request timed out after the service had created it', async () => {
      // The first answer comes after SERVICE_TIMEOUT_MS: the engine gives up and retries (the same
      // Idempotency-Key gets the same task), while the service has already reported the task.
      // Until the retry tells the engine which task it made, that report looks like an outside
      // change: the engine may copy once more, and the chain stops there.
      await start([copyNewTasks(false)], { SERVICE_TIMEOUT_MS: '300' }, { answerDelayMs: 600, slowAnswers: 1 });
      await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
      await quiescence(both, 15_000);

      const made = tasksCreatedByEngine(sim).filter((r) => !r.replayed);
      expect(made.length).toBeGreaterThanOrEqual(1);
      expect(made.length).toBeLessThanOrEqual(2);
      const created = await eventsOfType('task.created');
      expect(created.filter((e) => e.status === 'ignored').map((e) => e.depth)).toEqual([1]);
      await expectNothingMoreHappens();
    });

    it('feeds itself when allowed to, until the chain reaches MAX_CHAIN_DEPTH and is cut', async () => {
      await start([copyNewTasks(true)], { MAX_CHAIN_DEPTH: '3' });
      const task = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
      await quiescence(both);

      // One outside event, then three links of engine-caused events; the third is the last one acted on.
      const chain = await eventsOfType('task.created');
      expect(chain.map((e) => [e.depth, e.status])).toEqual([
        [0, 'processed'],
        [1, 'processed'],
        [2, 'processed'],
        [3, 'loop_blocked'],
      ]);
      expect(tasksCreatedByEngine(sim).map((r) => (r.body as { title: string }).title)).toEqual([
        'Copy of Plan the sprint',
        'Copy of Copy of Plan the sprint',
        'Copy of Copy of Copy of Plan the sprint',
      ]);
      expect(chain[0].resource).toBe(`task:${task.id}`);

      const blocked = (await allPages(engine, '/admin/events?status=loop_blocked', 500)).items;
      expect(blocked.map((e) => e.id)).toEqual([chain[3].id]);
      const explained = await detail(blocked[0].id);
      expect(explained.rules).toEqual([]); // nothing evaluated it
      expect(explained.executions).toEqual([]);
      expect(await loopsBlockedMetric()).toBeGreaterThanOrEqual(1);

      await expectNothingMoreHappens();
      expect(tasksCreatedByEngine(sim)).toHaveLength(3);
    });
  });

  describe('two rules that feed each other through the service', () => {
    it('are cut with loop_blocked when both allow self-triggered events', async () => {
      await start([startNewTasks(true), followUpStartedTasks(true)], { MAX_CHAIN_DEPTH: '4' });
      const task = await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'Write the spec' });
      await quiescence(both);

      // person creates → A starts it → B follows up → A starts the follow-up → B follows up → cut.
      const created = await eventsOfType('task.created');
      const updated = await eventsOfType('task.updated');
      expect(created.map((e) => [e.depth, e.status])).toEqual([[0, 'processed'], [2, 'processed'], [4, 'loop_blocked']]);
      expect(updated.map((e) => [e.depth, e.status])).toEqual([[1, 'processed'], [3, 'processed']]);
      const patches = engineRequests(sim, 'PATCH', /^\/v1\/tasks\//).filter((r) => r.status === 200);
      const creates = tasksCreatedByEngine(sim);
      expect(patches.map((r) => r.path)).toEqual([`/v1/tasks/${task.id}`, expect.stringMatching(/^\/v1\/tasks\//)]);
      expect(creates.map((r) => (r.body as { title: string }).title)).toEqual([
        'Follow-up: Write the spec',
        'Follow-up: Follow-up: Write the spec',
      ]);
      expect(patches.length + creates.length).toBe(4);
      expect((await allPages(engine, '/admin/events?status=loop_blocked', 500)).items).toHaveLength(1);
      expect(await loopsBlockedMetric()).toBeGreaterThanOrEqual(1);

      await expectNothingMoreHappens();
    });

    it('stop after one action each when neither allows self-triggered events', async () => {
      await start([startNewTasks(false), followUpStartedTasks(false)]);

      // A person creates a task: A starts it, and B ignores the update A caused.
      const created = await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'Write the spec' });
      await quiescence(both);
      // A person starts a task: B follows it up, and A ignores the task B created.
      await updateTaskAsAPerson(sim, 'tsk_1', { status: 'in_progress' });
      await quiescence(both);

      const ownUpdate = await eventAbout('task.updated', created.id);
      expect(ownUpdate).toMatchObject({ status: 'ignored', depth: 1 });
      expect((await detail(ownUpdate.id)).rules).toEqual([
        expect.objectContaining({ rule: 'follow-up-started-tasks', outcome: 'ignored_self_caused' }),
      ]);
      const followUp = (await eventsOfType('task.created')).find((e) => e.resource !== `task:${created.id}`);
      expect(followUp).toMatchObject({ status: 'ignored', depth: 1 });
      expect((await detail(followUp.id)).rules).toEqual([
        expect.objectContaining({ rule: 'start-new-tasks', outcome: 'ignored_self_caused' }),
      ]);
      const patches = engineRequests(sim, 'PATCH', /^\/v1\/tasks\//).filter((r) => r.status === 200);
      expect(patches.map((r) => [r.path, r.body])).toEqual([[`/v1/tasks/${created.id}`, { status: 'in_progress' }]]);
      expect(tasksCreatedByEngine(sim).map((r) => r.body)).toEqual([{ project_id: 'prj_1', title: 'Follow-up: Draft the release notes' }]);
      expect((await allPages(engine, '/admin/events?status=loop_blocked', 500)).items).toEqual([]);

      await expectNothingMoreHappens();
      expect(await loopsBlockedMetric()).toBe(0);
    });
  });
});
