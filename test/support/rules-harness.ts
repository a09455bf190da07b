/** Shared set-up of the admin rules suites: engines with a simulator, and rules to give them. */
import { startSimulator, type Simulator } from '../../src/simulator/simulator.js';
import type { DatabaseKindUnderTest } from './databases.js';
import { rulesDir, startEngine } from './engine.js';

/** A rule that creates a task titled `<prefix>: <event's task title>` on `on`. */
export function taskRule(id: string, on: string | string[], prefix: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    name: `Rule ${id}`,
    on,
    actions: [{ id: 'create', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: `${prefix}: {{ event.data.task.title }}` } }],
    ...extra,
  };
}

/** Release titles in prj_1 get a review task, then the notify workflow with that task's id. */
export const releaseReview = {
  id: 'release-review',
  name: 'Review releases',
  on: 'task.completed',
  conditions: {
    all: [
      { fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' },
      { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release' },
    ],
  },
  actions: [
    { id: 'review', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } },
    { type: 'workflow.trigger', params: { id: 'wf_notify', input: { task_id: '{{ actions.review.response.id }}' } } },
  ],
};

/** Engines started by one describe block, stopped (engines first) by `cleanUp`. */
export function engineHarness(kind: DatabaseKindUnderTest) {
  const cleanups: Array<() => Promise<unknown>> = [];

  async function freshEngine(rules: unknown[], env: Record<string, string> = {}) {
    const db = await kind.create();
    const sim = await startSimulator({ seed: true });
    const dir = rulesDir(rules);
    const engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: dir, ...env });
    cleanups.push(() => engine.stop(), () => sim.close(), () => db.drop());
    return { db, sim, dir, engine };
  }

  async function cleanUp() {
    for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => undefined);
  }

  const writes = (sim: Simulator) => sim.requests.filter((r) => r.method !== 'GET');
  const tasksTitled = (sim: Simulator, prefix: string) =>
    sim.requests.filter(
      (r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && String((r.body as { title?: string }).title).startsWith(prefix),
    );
  const ids = (items: Array<{ id: string }>) => items.map((item) => item.id);
  return { freshEngine, cleanUp, writes, tasksTitled, ids, cleanups };
}
