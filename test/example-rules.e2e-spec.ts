/**
 * The example rules of "Time and sets" (rules/*.json, as shipped), end to end
 * over real HTTP with the simulator, on SQLite and PostgreSQL: archiving a
 * project at the service closes each of its open tasks, and the escalation
 * rule (its P3D shortened to a second, nothing else changed) acts once on a
 * task still open and not at all on one completed while it waits.
 */
import { readFileSync } from 'node:fs';
import type { Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { useRig } from './support/fixture.js';
import { createTaskAsAPerson, engineRequests, quiescence, updateTaskAsAPerson, type RoundTrip } from './support/round-trip.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('example rules');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const example = (file: string): any => JSON.parse(readFileSync(`rules/${file}`, 'utf8'));

describe.each(kinds)('the time and sets examples on $name', (kind) => {
  const rig = useRig(kind, { simulator: false });
  let both: RoundTrip;
  let engine: RunningEngine;
  let sim: Simulator;

  async function start(rules: unknown[]) {
    both = await rig.roundTrip(rules);
    ({ engine, sim } = both);
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const executionsOf = async (rule: string): Promise<any[]> => (await allPages(engine, `/admin/executions?rule=${rule}`, 500)).items;
  const patchesOf = (taskId: string) => engineRequests(sim, 'PATCH', new RegExp(`^/v1/tasks/${taskId}$`));

  it('close-tasks-of-archived-project: a project archived at the service gets each open task completed, once, with its own key', async () => {
    await start([example('close-tasks-of-archived-project.json')]);
    const open = [await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'o1' }), await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'o2', priority: 'high' })];
    const done = [await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'd1', status: 'completed' }), await createTaskAsAPerson(sim, { project_id: 'prj_2', title: 'd2', status: 'completed' })];
    const archived = await fetch(`${sim.url}/projects/prj_2`, { method: 'DELETE', headers: { Authorization: 'Bearer ac_test_a_person_using_the_app' } });
    expect(archived.status).toBe(200);
    const openIds = ['tsk_3', ...open.map((t) => t.id)];
    await waitUntil(() => openIds.every((id) => sim.state.tasks.get(id)?.status === 'completed'), { timeoutMs: 15_000, what: 'the open tasks completed' });
    await quiescence(both);
    const keys = openIds.map((id) => patchesOf(id).map((r) => r.idempotencyKey));
    expect(keys.map((k) => k.length)).toEqual([1, 1, 1]);
    expect(new Set(keys.flat()).size).toBe(3);
    expect(done.flatMap((t) => patchesOf(t.id))).toEqual([]);
    const [execution] = await executionsOf('close-tasks-of-archived-project');
    expect(execution.status).toBe('succeeded');
  });

  it('escalate-stale-task: still open after the delay → raised and escalated once; completed meanwhile → cancelled, nothing sent', async () => {
    const rule = example('escalate-stale-task.json');
    expect(rule.actions[0]).toEqual({ type: 'delay', params: { duration: 'P3D' } });
    rule.actions[0].params.duration = 'PT1S';
    await start([rule]);
    const stale = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Left alone' });
    const finished = await createTaskAsAPerson(sim, { project_id: 'prj_1', title: 'Done in time' });
    await waitUntil(async () => (await executionsOf('escalate-stale-task')).filter((x) => x.status === 'waiting').length === 2, { what: 'two waiting executions' });
    await updateTaskAsAPerson(sim, finished.id, { status: 'completed' });
    await waitUntil(() => patchesOf(stale.id).length === 1, { timeoutMs: 15_000, what: 'the escalation' });
    await quiescence(both);
    expect(patchesOf(stale.id).map((r) => r.body)).toEqual([{ priority: 'urgent' }]);
    expect(sim.state.tasks.get(stale.id)?.priority).toBe('urgent');
    const escalations = engineRequests(sim, 'POST', /^\/v1\/workflows\/wf_escalate\/trigger$/);
    expect(escalations.map((r) => (r.body as { task_id: string }).task_id)).toEqual([stale.id]);
    expect(patchesOf(finished.id)).toEqual([]);
    const statuses = (await executionsOf('escalate-stale-task')).map((x) => x.status).sort();
    expect(statuses).toEqual(['cancelled', 'succeeded']);
  });
});
