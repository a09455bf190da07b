/**
 * Isolation (README, Guarantees: the causal barrier): a slow call to the
 * service holds back only the events it could have caused. The simulator
 * creates a task at once and reports it with a webhook, while the answer to
 * the engine's request is held on its way back; meanwhile people create tasks
 * in the same project and in another one. Figures are printed for the closing
 * note: the worst latency of the other project's events behind a slow create.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { copyNewTasks } from './support/rules-harness.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { createTaskAsAPerson, engineRequests, quiescence, tasksCreatedByEngine, type RoundTrip, type RoundTripOptions } from './support/round-trip.js';
import { waitUntil } from './support/wait.js';

const SLOW_ANSWER_MS = 8_000;

/** A completed task in prj_1 gets a follow-up task there: the engine's create that the test holds. */
const followUpInProjectOne = {
  id: 'follow-up-in-prj-1',
  name: 'Follow up completed tasks of prj_1',
  on: 'task.completed',
  conditions: { all: [{ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' }] },
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Follow-up: {{ event.data.task.title }}' } }],
};

/** Every new open task is started: the act the test times (task.update, which creates nothing). */
const startNewTasks = {
  id: 'start-new-tasks',
  name: 'Start every new task',
  on: 'task.created',
  conditions: { all: [{ fact: 'event', path: '$.data.task.status', operator: 'equal', value: 'open' }] },
  actions: [{ type: 'task.update', params: { id: '{{ event.data.task.id }}', status: 'in_progress' } }],
};

const kinds = await databasesUnderTest('isolation');

describe.each(kinds)('isolation of a slow create on $name', (kind) => {
  const rig = useRig(kind, { simulator: false });
  let both: RoundTrip;
  let engine: RunningEngine;
  let sim: Simulator;

  async function start(rules: unknown[], env: Record<string, string>, options: RoundTripOptions) {
    both = await rig.roundTrip(rules, env, options);
    ({ engine, sim } = both);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function taskCreatedEvents(): Promise<any[]> {
    return (await allPages(engine, '/admin/events?type=task.created', 500)).items.reverse();
  }
  const eventAbout = async (taskId: string) => (await taskCreatedEvents()).find((e) => e.resource === `task:${taskId}`);
  const startedAt = (taskId: string) => engineRequests(sim, 'PATCH', new RegExp(`^/v1/tasks/${taskId}$`))[0]?.time;

  it('events about new tasks of another project act at once; those of its own project wait for its answer, explained', async () => {
    await start([followUpInProjectOne, startNewTasks], { SERVICE_TIMEOUT_MS: '15000' }, { answerDelayMs: SLOW_ANSWER_MS, slowAnswers: 1 });
    expect((await deliver(engine.url, aTaskEvent('task.completed', { project_id: 'prj_1', title: 'Ship it', status: 'completed' }))).status).toBe(202);
    await waitUntil(() => tasksCreatedByEngine(sim).length === 1 || engineRequests(sim, 'POST', /^\/v1\/tasks$/).length === 1, { timeoutMs: 10_000 });
    const createSentAt = Date.parse(engineRequests(sim, 'POST', /^\/v1\/tasks$/)[0]!.time);

    const other: Array<{ id: string }> = [];
    const same: Array<{ id: string }> = [];
    for (let i = 0; i < 5; i++) {
      other.push(await createTaskAsAPerson(sim, { project_id: 'prj_2', title: `B${i}` }));
      same.push(await createTaskAsAPerson(sim, { project_id: 'prj_1', title: `A${i}` }));
    }
    await waitUntil(() => other.every((t) => startedAt(t.id) !== undefined), { timeoutMs: 5_000 });
    const latencies = [];
    for (const task of other) {
      const event = await eventAbout(task.id);
      latencies.push(Date.parse(startedAt(task.id)!) - Date.parse(event.received_at));
    }

    // Meanwhile, the events of prj_1 wait, and say for what.
    const held = await eventAbout(same[4]!.id);
    expect(startedAt(same[4]!.id)).toBeUndefined();
    const detail = await body(engine.admin(`/admin/events/${encodeURIComponent(held.id)}`));
    const context = await body(engine.admin(`/admin/events/${encodeURIComponent(held.id)}/context`));
    expect(context.waiting).toEqual(detail.waiting);
    expect(detail.status).toBe('received');
    expect(detail.waiting).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'causal_barrier',
          scope: { kind: 'task', parent: 'project:prj_1' },
          runs: [expect.objectContaining({ type: 'task.create', rule: 'follow-up-in-prj-1', creates_in: { kind: 'task', parent: 'project:prj_1' } })],
        }),
      ]),
    );

    await waitUntil(() => same.every((t) => startedAt(t.id) !== undefined), { timeoutMs: SLOW_ANSWER_MS + 10_000 });
    const sameWaited = same.map((t) => Date.parse(startedAt(t.id)!) - createSentAt);
    process.stdout.write(
      `\nisolation figures (${kind.name}): other project's events acted ${Math.min(...latencies)}–${Math.max(...latencies)} ms after arriving ` +
        `behind a create answered after ${SLOW_ANSWER_MS} ms; the same project's acted ${Math.min(...sameWaited)}–${Math.max(...sameWaited)} ms after the create was sent\n`,
    );
    // Not held: every event of the other project acted well before the create's answer came back. The bound is
    // relative to that answer, not an absolute figure: alone, they act in tens of milliseconds (printed above), but
    // in one of CI's full runs, the machine shared with the rest of the suite, PostgreSQL's took 193–1157 ms.
    expect(Math.max(...latencies)).toBeLessThan(SLOW_ANSWER_MS / 2);
    expect(Math.max(...other.map((t) => Date.parse(startedAt(t.id)!)))).toBeLessThan(Math.min(...same.map((t) => Date.parse(startedAt(t.id)!))));
    expect(Math.min(...sameWaited)).toBeGreaterThanOrEqual(SLOW_ANSWER_MS - 500);

    // The engine's own follow-up was recognised as its own once the answer came: not started, not copied.
    await quiescence(both, 20_000);
    const followUp = tasksCreatedByEngine(sim)[0]!.body as { title: string };
    expect(followUp.title).toBe('Follow-up: Ship it');
    const own = (await taskCreatedEvents()).filter((e) => e.depth === 1);
    expect(own.map((e) => e.status)).toEqual(['ignored']);
  });

  it('with a create answered 3 s after its webhook, a rule copying new tasks copies a person’s task once', async () => {
    await start([copyNewTasks(false)], { SERVICE_TIMEOUT_MS: '10000' }, { answerDelayMs: 3_000 });
    await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
    await quiescence(both, 20_000).catch(() => undefined);
    expect(tasksCreatedByEngine(sim).map((r) => (r.body as { title: string }).title)).toEqual(['Copy of Plan the sprint']);
    const created = await taskCreatedEvents();
    expect(created.map((e) => [e.depth, e.status])).toEqual([[0, 'processed'], [1, 'ignored']]);
  });

  it('with a create answered 3 s after its webhook, a self-feeding rule stops at MAX_CHAIN_DEPTH', async () => {
    await start([copyNewTasks(true)], { SERVICE_TIMEOUT_MS: '10000', MAX_CHAIN_DEPTH: '3' }, { answerDelayMs: 3_000 });
    await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Plan the sprint' });
    await quiescence(both, 30_000).catch(() => undefined);
    expect(tasksCreatedByEngine(sim)).toHaveLength(3);
    const created = await taskCreatedEvents();
    expect(created.map((e) => [e.depth, e.status])).toEqual([[0, 'processed'], [1, 'processed'], [2, 'processed'], [3, 'loop_blocked']]);
  });
});
