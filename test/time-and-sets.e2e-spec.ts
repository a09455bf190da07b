/**
 * Time and sets in rules (SPEC section 11), end to end over real HTTP with the
 * simulator, on SQLite and PostgreSQL, with durations of a second: a delay
 * that acts when due, one cancelled by a later event about its resource, a
 * check that stops the execution on a fresh lookup, a forEach with one run per
 * item, a debounce that acts once on the last event, an engine event that a
 * rule acts on, and an operator's cancel and resume.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { createTaskAsAPerson, engineRequests, quiescence, updateTaskAsAPerson, type RoundTrip } from './support/round-trip.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('time and sets');

/** A new task is escalated a second later, unless it is completed meanwhile. */
const escalateLater = {
  id: 'escalate-later',
  on: 'task.created',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'SLA' }] },
  actions: [
    { type: 'delay', params: { duration: 'PT1S' } },
    { type: 'task.update', params: { id: '{{ event.data.task.id }}', title: 'Escalated: {{ event.data.task.title }}' } },
  ],
  options: { cancelOn: ['task.completed'] },
};

describe.each(kinds)('time and sets on $name', (kind) => {
  const rig = useRig(kind, { simulator: false });
  let both: RoundTrip;
  let engine: RunningEngine;
  let sim: Simulator;

  async function start(rules: unknown[], env: Record<string, string> = {}) {
    both = await rig.roundTrip(rules, env);
    ({ engine, sim } = both);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function executionsOf(rule: string): Promise<any[]> {
    return (await allPages(engine, `/admin/executions?rule=${rule}`, 500)).items.reverse();
  }
  const execution = (id: string) => body(engine.admin(`/admin/executions/${id}`));
  const patchesOf = (taskId: string) => engineRequests(sim, 'PATCH', new RegExp(`^/v1/tasks/${taskId}$`));

  describe('delay and cancelOn', () => {
    it('waits, then acts once when the delay is over', async () => {
      await start([escalateLater]);
      const task = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'SLA one' });
      const [waiting] = await waitUntil(async () => {
        const found = await executionsOf('escalate-later');
        return found.length === 1 && found[0].status === 'waiting' ? found : undefined;
      });
      expect(Date.parse(waiting.resume_at) - Date.parse(waiting.created_at)).toBeGreaterThanOrEqual(1_000);
      expect(patchesOf(task.id)).toEqual([]);
      await waitUntil(async () => (await execution(waiting.id)).status === 'succeeded', { timeoutMs: 10_000 });
      await quiescence(both);
      expect(patchesOf(task.id).map((r) => r.body)).toEqual([{ title: 'Escalated: SLA one' }]);
      expect(Date.parse(patchesOf(task.id)[0]!.time)).toBeGreaterThanOrEqual(Date.parse(waiting.resume_at));
    });

    it('is cancelled by a later event about the same resource, which names what it cancelled', async () => {
      await start([escalateLater]);
      const task = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'SLA two' });
      const other = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'SLA three' });
      await waitUntil(async () => (await executionsOf('escalate-later')).filter((x) => x.status === 'waiting').length === 2);
      await updateTaskAsAPerson(sim, task.id, { status: 'completed' });
      const completed = await waitUntil(async () => {
        const events = (await allPages(engine, '/admin/events?type=task.completed', 50)).items;
        return events.find((e: { status: string }) => e.status === 'processed' || e.status === 'ignored');
      });
      const cancelled = (await executionsOf('escalate-later')).find((x) => x.status === 'cancelled');
      expect(cancelled).toMatchObject({ cancelled_by: completed.id, resume_at: null });
      const detail = await body(engine.admin(`/admin/events/${encodeURIComponent(completed.id)}`));
      expect(detail.cancelled).toEqual([{ execution: cancelled.id, rule: 'escalate-later' }]);
      const runs = (await execution(cancelled.id)).actions;
      expect(runs.map((r: { type: string; status: string }) => [r.type, r.status])).toEqual([['delay', 'cancelled']]);
      // The other task's execution was not about that resource: it still acts.
      await waitUntil(() => patchesOf(other.id).length === 1, { timeoutMs: 10_000 });
      await quiescence(both);
      expect(patchesOf(task.id).filter((r) => (r.body as { title?: string }).title !== undefined)).toEqual([]);
    });
  });

  it('a check evaluated when reached, with a fresh lookup, stops the execution when it fails', async () => {
    await start([
      {
        id: 'check-project',
        on: 'task.created',
        actions: [
          { type: 'delay', params: { duration: 'PT1S' } },
          { type: 'check', conditions: { all: [{ fact: 'project', params: { id: '{{ event.data.task.project_id }}' }, path: '$.status', operator: 'equal', value: 'active' }] } },
          { type: 'task.update', params: { id: '{{ event.data.task.id }}', title: 'Checked' } },
        ],
      },
    ]);
    const kept = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'In an active project' });
    const dropped = await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'In a project archived meanwhile' });
    await waitUntil(async () => (await executionsOf('check-project')).filter((x) => x.status === 'waiting').length === 2);
    const archived = await fetch(`${sim.url}/projects/prj_2`, { method: 'DELETE', headers: { Authorization: 'Bearer ac_test_a_person_using_the_app' } });
    expect(archived.status).toBe(200);
    await waitUntil(async () => (await executionsOf('check-project')).every((x) => x.status === 'succeeded' || x.status === 'stopped'), { timeoutMs: 10_000 });
    const [first, second] = await executionsOf('check-project');
    expect([first.status, second.status].sort()).toEqual(['stopped', 'succeeded']);
    const stopped = await execution([first, second].find((x) => x.status === 'stopped').id);
    const check = stopped.actions.find((r: { type: string }) => r.type === 'check');
    expect(check.response).toMatchObject({ passed: false, conditions: [expect.objectContaining({ fact: 'project', factValue: 'archived' })] });
    expect(stopped.actions.map((r: { type: string }) => r.type)).toEqual(['delay', 'check']);
    expect(patchesOf(kept.id)).toHaveLength(1);
    expect(patchesOf(dropped.id)).toEqual([]);
  });

  it('forEach: one run per item, each with its own key, and a failed item retried on its own', async () => {
    await start([
      {
        id: 'close-open-tasks',
        on: 'project.archived',
        actions: [
          {
            type: 'task.update',
            forEach: { fact: 'tasks', params: { project_id: '{{ event.data.project.id }}' }, path: "$[?(@.status != 'completed')]" },
            params: { id: '{{ item.id }}', status: 'completed', title: '{{ item.title }} (closed, {{ index }})' },
          },
        ],
      },
    ]);
    const tasks = [];
    for (const title of ['c1', 'c2', 'd1', 'd2']) tasks.push(await createTaskAsAPerson(sim, { project_id: 'prj_2', title }));
    for (const task of tasks.slice(2)) await updateTaskAsAPerson(sim, task.id, { status: 'completed' });
    const open = [...sim.state.tasks.values()].filter((t) => t.project_id === 'prj_2' && t.status !== 'completed');
    expect(open.length).toBe(3); // the seed's open task and c1, c2
    await sim.setFaults({ script: [{ status: 500, method: 'PATCH', pathPrefix: `/tasks/${open[1]!.id}` }] });
    expect((await deliver(engine.url, { id: 'evt_archive_prj_2', type: 'project.archived', data: { project: { id: 'prj_2' } } })).status).toBe(202);
    await waitUntil(() => open.every((t) => patchesOf(t.id).some((r) => r.status === 200)), { timeoutMs: 15_000 });
    await quiescence(both);
    const keys = open.map((t) => [...new Set(patchesOf(t.id).map((r) => r.idempotencyKey))]);
    expect(keys.every((k) => k.length === 1)).toBe(true);
    expect(new Set(keys.flat()).size).toBe(3);
    expect(open.map((t) => patchesOf(t.id).length)).toEqual([1, 2, 1]);
    const [x] = await executionsOf('close-open-tasks');
    expect(x.status).toBe('succeeded');
    const items = (await execution(x.id)).actions.filter((r: { item_index: number | null }) => r.item_index !== null);
    expect(items.map((r: { item_index: number; status: string }) => [r.item_index, r.status])).toEqual([[0, 'succeeded'], [1, 'succeeded'], [2, 'succeeded']]);
  });

  it('debounce: ten edits within the window act once, on the last; the others are debounced into it', async () => {
    await start([
      {
        id: 'settle-edits',
        on: 'task.updated',
        actions: [{ type: 'workflow.trigger', params: { id: 'wf_notify', input: { title: '{{ event.data.task.title }}' } } }],
        options: { debounce: { seconds: 1, key: '{{ event.data.task.id }}' } },
      },
    ]);
    const task = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'e0' });
    for (let i = 1; i <= 10; i++) await updateTaskAsAPerson(sim, task.id, { title: `e${i}` });
    await waitUntil(async () => (await executionsOf('settle-edits')).some((x) => x.status === 'succeeded'), { timeoutMs: 15_000 });
    await quiescence(both);
    const triggers = engineRequests(sim, 'POST', /^\/v1\/workflows\/wf_notify\/trigger$/);
    expect(triggers.map((r) => r.body)).toEqual([{ title: 'e10' }]);
    const executions = await executionsOf('settle-edits');
    const ran = executions.filter((x) => x.status === 'succeeded');
    expect(ran).toHaveLength(1);
    expect(executions.filter((x) => x.status === 'debounced').map((x) => x.debounced_into)).toEqual(Array(9).fill(ran[0].id));
  });

  it('engine.action_run.failed: a rule creates a task for the operator from an action that failed for good', async () => {
    await start([
      {
        id: 'doomed',
        on: 'task.created',
        conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Doomed' }] },
        actions: [{ type: 'task.update', params: { id: 'tsk_missing', title: 'x' } }],
      },
      {
        id: 'tell-the-operator',
        on: 'engine.action_run.failed',
        actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Operator: {{ event.data.error.code }} in {{ event.data.rule_id }}' } }],
      },
    ]);
    await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Doomed task' });
    await waitUntil(() => [...sim.state.tasks.values()].some((t) => t.title.startsWith('Operator:')), { timeoutMs: 10_000 });
    await quiescence(both);
    expect([...sim.state.tasks.values()].filter((t) => t.title.startsWith('Operator:')).map((t) => t.title)).toEqual(['Operator: not_found in doomed']);
    const [failed] = (await allPages(engine, '/admin/events?type=engine.action_run.failed', 50)).items;
    expect(failed).toMatchObject({ status: 'processed' });
    const detail = await body(engine.admin(`/admin/events/${encodeURIComponent(failed.id)}`));
    expect(detail.payload.data).toMatchObject({ rule_id: 'doomed', error: { code: 'not_found' }, action_run: { type: 'task.update' } });
  });

  it('an operator resumes one waiting execution now and cancels another; a second cancel is refused', async () => {
    await start([{ ...escalateLater, id: 'escalate-in-an-hour', actions: [{ type: 'delay', params: { duration: 'PT1H' } }, escalateLater.actions[1]] }]);
    const resumed = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'SLA resumed' });
    await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'SLA cancelled' });
    const waiting = await waitUntil(async () => {
      const found = await executionsOf('escalate-in-an-hour');
      return found.length === 2 && found.every((x) => x.status === 'waiting') ? found : undefined;
    });
    // Which is which by the task each event is about: two executions made in the same millisecond share
    // created_at, and the list orders them by the random part of their ids.
    const taskOf = async (x: { event_id: string }) => (await body(engine.admin(`/admin/events/${encodeURIComponent(x.event_id)}`))).payload.data.task.id;
    const tasks = await Promise.all(waiting.map(taskOf));
    const a = waiting.find((_, i) => tasks[i] === resumed.id);
    const b = waiting.find((_, i) => tasks[i] !== resumed.id);
    expect([a, b].every(Boolean)).toBe(true);
    expect((await engine.admin(`/admin/executions/${a.id}/resume`, { method: 'POST' })).status).toBe(200);
    const cancel = await engine.admin(`/admin/executions/${b.id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(200);
    expect(await body(cancel)).toMatchObject({ status: 'cancelled', cancelled_by: 'admin' });
    const again = await engine.admin(`/admin/executions/${b.id}/cancel`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect((await body(again)).error.code).toBe('not_waiting');
    await waitUntil(() => patchesOf(resumed.id).length === 1, { timeoutMs: 10_000 });
    await quiescence(both);
    expect((await execution(a.id)).status).toBe('succeeded');
    expect((await engine.admin('/admin/executions/nope/cancel', { method: 'POST' })).status).toBe(404);
  });

  describe('loops', () => {
    const copyLater = (allowSelfTriggered: boolean) => ({
      id: 'copy-later',
      on: 'task.created',
      actions: [
        { type: 'delay', params: { duration: 'PT0.2S' } },
        { type: 'task.create', params: { project_id: 'prj_1', title: 'Copy of {{ event.data.task.title }}' } },
      ],
      options: { allowSelfTriggered },
    });
    const notifications = () => engineRequests(sim, 'POST', /^\/v1\/workflows\/wf_notify\/trigger$/);

    it('a delayed create is still the engine’s own: its task does not start the rule again', async () => {
      await start([copyLater(false)]);
      await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Once' });
      await waitUntil(() => [...sim.state.tasks.values()].some((t) => t.title === 'Copy of Once'), { timeoutMs: 10_000 });
      await quiescence(both);
      expect([...sim.state.tasks.values()].filter((t) => t.title.includes('Once')).map((t) => t.title).sort()).toEqual(['Copy of Once', 'Once']);
    });

    it('a forEach over the tasks the rule itself creates cannot loop: its copies are its own doing', async () => {
      await start([
        {
          id: 'copy-each',
          on: 'task.created',
          actions: [
            {
              type: 'task.create',
              forEach: { fact: 'tasks', params: { project_id: '{{ event.data.task.project_id }}' } },
              params: { project_id: '{{ item.project_id }}', title: 'Copy of {{ item.title }}' },
            },
          ],
        },
      ]);
      const before = [...sim.state.tasks.values()].filter((t) => t.project_id === 'prj_2').length;
      await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'Seed' });
      await waitUntil(() => [...sim.state.tasks.values()].filter((t) => t.title.startsWith('Copy of')).length === before + 1, { timeoutMs: 10_000 });
      await quiescence(both);
      expect([...sim.state.tasks.values()].filter((t) => t.title.startsWith('Copy of'))).toHaveLength(before + 1);
      const created = (await allPages(engine, '/admin/events?type=task.created', 500)).items;
      expect(created.filter((e: { status: string }) => e.status === 'ignored').map((e: { depth: number }) => e.depth)).toEqual(Array(before + 1).fill(1));
    });

    it('a chain cut by loop protection is reported as an engine event, which is not reported again', async () => {
      const reportLoops = {
        id: 'report-loops',
        on: 'engine.event.loop_blocked',
        actions: [{ type: 'workflow.trigger', params: { id: 'wf_notify', input: { blocked: '{{ event.data.event.id }}', depth: '{{ event.data.event.depth }}' } } }],
      };
      await start([copyLater(true), reportLoops], { MAX_CHAIN_DEPTH: '2' });
      await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Chain' });
      await waitUntil(() => notifications().length === 1, { timeoutMs: 15_000 });
      await quiescence(both);
      expect([...sim.state.tasks.values()].filter((t) => t.title.endsWith('Chain')).map((t) => t.title).sort()).toEqual(['Chain', 'Copy of Chain', 'Copy of Copy of Chain']);
      const blocked = (await allPages(engine, '/admin/events?status=loop_blocked', 50)).items;
      expect(blocked).toHaveLength(1);
      expect(notifications()[0]!.body).toEqual({ blocked: blocked[0].id, depth: 2 });
      const engineEvents = (await allPages(engine, '/admin/events?type=engine.event.loop_blocked', 50)).items;
      expect(engineEvents.map((e: { status: string }) => e.status)).toEqual(['processed']);
      expect(notifications()).toHaveLength(1);
    });
  });
});
