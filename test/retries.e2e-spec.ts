/**
 * Failures at the service, end to end: what is retried, what is waited out,
 * what fails at once and how an operator retries it, and dry-run.
 */
import { notYet } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

const followUp = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } }],
};

const kinds = await databasesUnderTest('retries');

describe.each(kinds)('failures at the service on $name', (kind) => {
  const rig = useRig(kind);
  let engine: RunningEngine;

  async function start(env: Record<string, string> = {}) {
    engine = await rig.start([followUp], env);
  }

  const taskPosts = () => rig.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks');
  const created = () => [...rig.sim.state.tasks.values()].filter((t) => String(t.title).startsWith('Review:'));

  async function runOf(eventId: string) {
    const detail = await body(engine.admin(`/admin/events/${eventId}`));
    return detail.executions?.[0]?.actions?.[0];
  }

  /** The event's action run once it has reached `status`. */
  function runReaching(eventId: string, status: string, timeoutMs = 10_000) {
    return waitUntil(
      async () => {
        const run = await runOf(eventId);
        return run?.status === status ? run : notYet(run ? `it is ${run.status} after ${run.attempts} attempt(s)` : 'no action run yet');
      },
      { timeoutMs, what: `the action run of ${eventId} to be ${status}` },
    );
  }

  it('retries 500s and ends with exactly one created task', async () => {
    rig.sim.setFaults({ script: [{ status: 500, count: 2, method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    const run = await runReaching(event.id!, 'succeeded', 15_000);
    expect(run.attempts).toBe(3);
    expect(taskPosts().map((r) => r.status)).toEqual([500, 500, 201]);
    expect(new Set(taskPosts().map((r) => r.idempotencyKey)).size).toBe(1);
    expect(created()).toHaveLength(1);
  });

  it('waits out a 429 for its Retry-After', async () => {
    rig.sim.setFaults({ script: [{ status: 429, retryAfter: 1, method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    await runReaching(event.id!, 'succeeded', 15_000);
    const [limited, ok] = taskPosts();
    expect(limited.status).toBe(429);
    expect(ok.status).toBe(201);
    expect(Date.parse(ok.time) - Date.parse(limited.time)).toBeGreaterThanOrEqual(950);
    expect(created()).toHaveLength(1);
  });

  it('fails a 400 at once, keeps its code, and retries it from the admin API', async () => {
    rig.sim.setFaults({ script: [{ status: 400, code: 'bad_title', message: 'title is not allowed', method: 'POST', pathPrefix: '/tasks' }] });
    await start();
    const event = aTaskEvent('task.completed');
    await deliver(engine.url, event);
    const failed = await runReaching(event.id!, 'failed');
    expect(failed).toMatchObject({ attempts: 1, error: { code: 'bad_title', message: 'title is not allowed' } });
    const dead = await body(engine.admin('/admin/actions?status=failed'));
    expect(dead.items.map((r: { id: string }) => r.id)).toEqual([failed.id]);

    const retry = await engine.admin(`/admin/actions/${failed.id}/retry`, { method: 'POST' });
    expect(retry.status).toBe(200);
    await runReaching(event.id!, 'succeeded');
    expect(created()).toHaveLength(1);
    const detail = await body(engine.admin(`/admin/events/${event.id!}`));
    expect(detail.executions[0].status).toBe('succeeded');
    const again = await engine.admin(`/admin/actions/${failed.id}/retry`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect((await body(again)).error.code).toBe('not_retryable');
  });

  it('sends nothing in dry-run and records the request it would have sent', async () => {
    await start({ DRY_RUN: 'true' });
    const event = aTaskEvent('task.completed', { title: 'Dry' });
    await deliver(engine.url, event);
    const run = await runReaching(event.id!, 'skipped');
    expect(run.request).toMatchObject({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Dry' } });
    expect(rig.sim.requests).toHaveLength(0);
  });
});
