/** What the admin rules, loops and isolation suites share: rules to give the engine, and what to look for at the simulator. */
import type { Simulator } from '../../src/simulator/simulator.js';

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

/** task.created → create another task: every task it creates is reported as task.created again. */
export function copyNewTasks(allowSelfTriggered: boolean) {
  return {
    id: 'copy-new-tasks',
    name: 'Copy every new task',
    on: 'task.created',
    actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Copy of {{ event.data.task.title }}' } }],
    options: { allowSelfTriggered },
  };
}

/** Evaluated for every task.completed in prj_1; fails on its `matches` condition unless the title starts with Release. */
export const reviewRelease = {
  id: 'release-review',
  on: 'task.completed',
  conditions: {
    all: [
      { fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' },
      { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release' },
    ],
  },
  actions: [{ id: 'review', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } }],
};

/** Its action always fails at once: the service answers 404 for a task that does not exist. */
export const updateMissing = {
  id: 'update-missing',
  on: 'task.blocked',
  actions: [{ type: 'task.update', params: { id: 'tsk_does_not_exist', status: 'open' } }],
};

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

/** Requests that change something at the service (anything but GET). */
export const writes = (sim: Simulator) => sim.requests.filter((r) => r.method !== 'GET');

/** Tasks created at the service whose title starts with `prefix`. */
export const tasksTitled = (sim: Simulator, prefix: string) =>
  sim.requests.filter(
    (r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && String((r.body as { title?: string }).title).startsWith(prefix),
  );

export const ids = (items: Array<{ id: string }>) => items.map((item) => item.id);
