/**
 * The admin API for what happened, end to end over HTTP: events with their
 * explanations, injecting and replaying events, executions, action runs and
 * their manual retry, on every database under test.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { errorOf, quietEngine, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { TEST_SECRET, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig, type RigOptions } from './support/fixture.js';
import { waitUntil } from './support/wait.js';
import { signBody } from '../src/intake/signature.js';
import { reviewRelease, updateMissing } from './support/rules-harness.js';

const kinds = await databasesUnderTest('admin events');

/** Each describe block below gets an engine of its own with both rules, on a fresh database. */
const ownEngine: RigOptions = { per: 'block', engine: { rules: [reviewRelease, updateMissing] } };

describe.each(kinds)('the admin events API on $name', (kind) => {
  const ids = (items: Array<{ id: string }>) => items.map((item) => item.id).sort();
  const reviews = (sim: Simulator, title: string) =>
    sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && (r.body as { title?: string }).title === `Review: ${title}`);

  describe('listing and reading events', () => {
    const rig = useRig(kind, ownEngine);
    let engine: RunningEngine;
    const released = aTaskEvent('task.completed', { title: 'Release 3' });
    const docs = aTaskEvent('task.completed', { title: 'Write docs' });
    const created = aTaskEvent('task.created', { title: 'Nobody listens' });
    const blocked = aTaskEvent('task.blocked', { title: 'Stuck' });

    /** The engine's own report of the blocked event's action failing for good (engine.action_run.failed), which no rule listens to. */
    const failureReport: { id?: string } = {};

    beforeAll(async () => {
      ({ engine } = rig);
      for (const event of [released, docs, created, blocked]) {
        expect((await deliver(engine.url, event)).status).toBe(202);
        const detail = await settledEvent(engine, event.id!);
        if (event === blocked) {
          const [run] = detail.executions[0].actions;
          failureReport.id = `engine:action_run.failed:${run.id}:${run.attempts}`;
        }
      }
      await settledEvent(engine, failureReport.id!);
    });

    it('lists every event with its summary, the engine’s own among them', async () => {
      const list = await body(engine.admin('/admin/events'));
      expect(list.next_cursor).toBeNull();
      expect(ids(list.items)).toEqual(ids([released, docs, created, blocked, failureReport] as Array<{ id: string }>));
      expect(list.items.find((e: { id: string }) => e.id === failureReport.id)).toMatchObject({ type: 'engine.action_run.failed', status: 'ignored', source: 'engine' });
      expect(list.items.find((e: { id: string }) => e.id === released.id)).toMatchObject({
        type: 'task.completed',
        status: 'processed',
        source: 'webhook',
        received_at: expect.any(String),
        replay_of: null,
      });
    });

    it.each([
      ['type=task.completed', ['released', 'docs']],
      ['status=ignored', ['docs', 'created', 'failureReport']],
      ['status=processed', ['released', 'blocked']],
      ['type=task.completed&status=ignored', ['docs']],
      ['type=task.completed&status=processed', ['released']],
      ['type=project.created', []],
    ])('filters with %s', async (query, names) => {
      const byName: Record<string, { id?: string }> = { released, docs, created, blocked, failureReport };
      const list = await body(engine.admin(`/admin/events?${query}`));
      expect(list.items.map((e: { id: string }) => e.id).sort()).toEqual(names.map((n) => byName[n].id).sort());
    });

    it('answers 400 naming the field to an unknown status', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/events?status=done'));
      expect(status).toBe(400);
      expect(error.details).toEqual([expect.objectContaining({ path: 'status' })]);
    });

    it("explains a rule that was evaluated and did not fire: each condition's fact value and result", async () => {
      const detail = await body(engine.admin(`/admin/events/${docs.id}`));
      expect(detail).toMatchObject({ id: docs.id, status: 'ignored', payload: docs, executions: [] });
      expect(detail.rules).toEqual([
        expect.objectContaining({
          rule: 'release-review',
          outcome: 'not_matched',
          conditions: [
            expect.objectContaining({ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1', factValue: 'prj_1', result: true }),
            expect.objectContaining({ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release', factValue: 'Write docs', result: false }),
          ],
        }),
      ]);
    });

    it('shows a matched rule with its execution and the request its action sent', async () => {
      const detail = await body(engine.admin(`/admin/events/${released.id}`));
      expect(detail.status).toBe('processed');
      expect(detail.rules).toEqual([
        expect.objectContaining({ rule: 'release-review', outcome: 'matched', conditions: [expect.objectContaining({ result: true }), expect.objectContaining({ result: true, factValue: 'Release 3' })] }),
      ]);
      expect(detail.executions).toEqual([
        expect.objectContaining({
          rule: 'release-review',
          status: 'succeeded',
          event_id: released.id,
          rule_version: expect.any(String),
          actions: [
            expect.objectContaining({
              type: 'task.create',
              status: 'succeeded',
              attempts: 1,
              response_status: 201,
              request: expect.objectContaining({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Release 3' } }),
            }),
          ],
        }),
      ]);
    });

    it('shows no rules for an event nobody listens to', async () => {
      const detail = await body(engine.admin(`/admin/events/${created.id}`));
      expect(detail).toMatchObject({ status: 'ignored', rules: [], executions: [] });
    });

    it('answers 404 not_found for an unknown event', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/events/evt_no_such_event'));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
    });
  });

  describe('injecting events', () => {
    const rig = useRig(kind, ownEngine);
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = rig);
    });

    it('accepts an unsigned event (202), evaluates it, and answers 200 duplicate to the same id', async () => {
      const event = aTaskEvent('task.completed', { title: 'Release injected' });
      const res = await engine.admin('/admin/events', sendJson('POST', event));
      expect(res.status).toBe(202);
      expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
      const detail = await settledEvent(engine, event.id!);
      expect(detail).toMatchObject({ source: 'admin', status: 'processed' });
      expect(reviews(sim, 'Release injected')).toHaveLength(1);

      const again = await engine.admin('/admin/events', sendJson('POST', event));
      expect(again.status).toBe(200);
      expect(await body(again)).toEqual({ id: event.id, status: 'duplicate' });
      // Once the engine has nothing left to do, nothing more can reach the service: the count is final.
      await quietEngine(engine);
      expect(reviews(sim, 'Release injected')).toHaveLength(1);
      expect((await body(engine.admin(`/admin/events/${event.id}`))).executions).toHaveLength(1);
    });

    it('names an event without an id by the SHA-256 of its body', async () => {
      const { id: _none, ...event } = aTaskEvent('task.created');
      const answer = await body(engine.admin('/admin/events', sendJson('POST', event)));
      expect(answer).toEqual({ id: expect.stringMatching(/^[0-9a-f]{64}$/), status: 'accepted' });
      expect((await engine.admin(`/admin/events/${answer.id}`)).status).toBe(200);
    });

    it.each([
      ['not JSON', '{"type": "task.completed",', 'invalid_json'],
      ['without a type', JSON.stringify({ id: 'evt_no_type', data: {} }), 'invalid_event'],
      ['not an object', '[]', 'invalid_event'],
      ['with data that is not an object', JSON.stringify({ type: 'task.completed', data: 'x' }), 'invalid_event'],
    ])('answers 400 to an event %s', async (_what, raw, code) => {
      const { status, error } = await errorOf(engine.admin('/admin/events', sendJson('POST', raw)));
      expect(status).toBe(400);
      expect(error.code).toBe(code);
    });

    it('stores nothing for refused events', async () => {
      expect((await engine.admin('/admin/events/evt_no_type')).status).toBe(404);
    });

    it('needs the admin token, even with a valid webhook signature', async () => {
      const event = aTaskEvent('task.completed', { title: 'Release signed' });
      const raw = JSON.stringify(event);
      const res = await fetch(`${engine.url}/admin/events`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Service-Signature': signBody(raw, TEST_SECRET) },
        body: raw,
      });
      expect(res.status).toBe(401);
      expect((await body(res)).error.code).toBe('unauthorized');
      expect((await engine.admin(`/admin/events/${event.id}`)).status).toBe(404);
    });
  });

  describe('replaying events', () => {
    const rig = useRig(kind, ownEngine);
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = rig);
    });

    it('evaluates a stored event again as a new event linked to the original, acting again', async () => {
      const original = aTaskEvent('task.completed', { title: 'Release replayed' });
      await deliver(engine.url, original);
      await settledEvent(engine, original.id!);
      expect(reviews(sim, 'Release replayed')).toHaveLength(1);

      const res = await engine.admin(`/admin/events/${original.id}/replay`, { method: 'POST' });
      expect(res.status).toBe(202);
      const answer = await body(res);
      expect(answer).toMatchObject({ id: expect.any(String), status: 'accepted', replay_of: original.id });
      expect(answer.id).not.toBe(original.id);

      const replay = await settledEvent(engine, answer.id);
      expect(replay).toMatchObject({ id: answer.id, replay_of: original.id, source: 'replay', type: 'task.completed', status: 'processed' });
      expect(replay.executions).toEqual([expect.objectContaining({ rule: 'release-review', status: 'succeeded' })]);
      await waitUntil(() => reviews(sim, 'Release replayed').length === 2, { timeoutMs: 10_000, what: 'a second review task' });
      const tasks = [...sim.state.tasks.values()].filter((t) => t.title === 'Review: Release replayed');
      expect(tasks).toHaveLength(2);

      const before = await body(engine.admin(`/admin/events/${original.id}`));
      expect(before.executions).toHaveLength(1);
      expect(before.replay_of).toBeNull();
      const list = await body(engine.admin(`/admin/events?type=task.completed`));
      expect(list.items.map((e: { id: string }) => e.id).sort()).toEqual([original.id, answer.id].sort());
    });

    it('evaluates the replay with the rules as they are now', async () => {
      const original = aTaskEvent('task.completed', { title: 'Draft replayed' });
      await deliver(engine.url, original);
      expect((await settledEvent(engine, original.id!)).status).toBe('ignored');
      const rule = {
        id: 'draft-review',
        on: 'task.completed',
        conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Draft' }] },
        actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review: {{ event.data.task.title }}' } }],
      };
      expect((await engine.admin('/admin/rules', sendJson('POST', rule))).status).toBe(201);
      const answer = await body(engine.admin(`/admin/events/${original.id}/replay`, { method: 'POST' }));
      const replay = await settledEvent(engine, answer.id);
      expect(replay.status).toBe('processed');
      expect(replay.rules).toEqual(expect.arrayContaining([expect.objectContaining({ rule: 'draft-review', outcome: 'matched' })]));
      await waitUntil(() => reviews(sim, 'Draft replayed').length === 1, { timeoutMs: 10_000, what: 'the review of the replay' });
    });

    it('replays an event whose id is as long as an event id may be (255 characters)', async () => {
      const original = aTaskEvent('task.completed', { title: 'Release long id' }, { id: `evt_${'x'.repeat(251)}` });
      expect(original.id).toHaveLength(255);
      expect((await deliver(engine.url, original)).status).toBe(202);
      await settledEvent(engine, original.id!);
      const res = await engine.admin(`/admin/events/${original.id}/replay`, { method: 'POST' });
      expect(res.status).toBe(202);
      const answer = await body(res);
      expect(answer).toMatchObject({ status: 'accepted', replay_of: original.id });
      expect(answer.id.length).toBeLessThanOrEqual(255);
      expect(await settledEvent(engine, answer.id)).toMatchObject({ replay_of: original.id, status: 'processed' });
      await waitUntil(() => reviews(sim, 'Release long id').length === 2, { timeoutMs: 10_000, what: 'the review of the replay' });
    });

    it('answers 404 not_found to a replay of an unknown event, storing nothing', async () => {
      const before = await body(engine.admin('/admin/events?limit=500'));
      const { status, error } = await errorOf(engine.admin('/admin/events/evt_no_such_event/replay', { method: 'POST' }));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
      expect(await body(engine.admin('/admin/events?limit=500'))).toEqual(before);
    });
  });

  describe('executions and action runs', () => {
    const rig = useRig(kind, ownEngine);
    let engine: RunningEngine;
    let sim: Simulator;
    const released = aTaskEvent('task.completed', { title: 'Release 4' });
    const blocked = aTaskEvent('task.blocked', { title: 'Blocked' });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    let succeeded: any;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    let failed: any;

    beforeAll(async () => {
      ({ engine, sim } = rig);
      await deliver(engine.url, released);
      await deliver(engine.url, blocked);
      succeeded = (await settledEvent(engine, released.id!)).executions[0];
      failed = (await settledEvent(engine, blocked.id!)).executions[0];
    });

    it('ends one execution succeeded and the other failed with the service error', () => {
      expect(succeeded).toMatchObject({ rule: 'release-review', status: 'succeeded' });
      expect(failed).toMatchObject({ rule: 'update-missing', status: 'failed' });
      expect(failed.actions[0]).toMatchObject({ status: 'failed', attempts: 1, response_status: 404, error: { code: 'not_found', message: expect.any(String) } });
    });

    it.each([
      ['', ['succeeded', 'failed']],
      ['rule=release-review', ['succeeded']],
      ['rule=update-missing', ['failed']],
      ['status=failed', ['failed']],
      ['status=succeeded', ['succeeded']],
      ['rule=release-review&status=failed', []],
      ['rule=no-such-rule', []],
    ])('lists executions filtered by "%s"', async (query, names) => {
      const byName: Record<string, { id: string }> = { succeeded, failed };
      const list = await body(engine.admin(`/admin/executions?${query}`));
      expect(list.items.map((x: { id: string }) => x.id).sort()).toEqual(names.map((n) => byName[n].id).sort());
      for (const item of list.items) expect(item).toMatchObject({ rule: expect.any(String), status: expect.any(String), event_id: expect.any(String), rule_version: expect.any(String) });
    });

    it('answers 400 naming the field to an unknown execution status', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/executions?status=done'));
      expect(status).toBe(400);
      expect(error.details).toEqual([expect.objectContaining({ path: 'status' })]);
    });

    it('shows one execution with its action runs', async () => {
      const res = await engine.admin(`/admin/executions/${failed.id}`);
      expect(res.status).toBe(200);
      const execution = await body(res);
      expect(execution).toMatchObject({ id: failed.id, event_id: blocked.id, rule: 'update-missing', status: 'failed', finished_at: expect.any(String) });
      expect(execution.actions).toEqual([
        expect.objectContaining({ id: failed.actions[0].id, type: 'task.update', status: 'failed', request: expect.objectContaining({ method: 'PATCH', path: '/tasks/tsk_does_not_exist' }) }),
      ]);
    });

    it('answers 404 not_found for an unknown execution', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/executions/00000000-0000-0000-0000-000000000000'));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
    });

    it.each([
      ['failed', 'failed'],
      ['succeeded', 'succeeded'],
    ])('lists action runs with status=%s', async (status, name) => {
      const run = (name === 'failed' ? failed : succeeded).actions[0];
      const list = await body(engine.admin(`/admin/actions?status=${status}`));
      expect(list.items.map((r: { id: string }) => r.id)).toEqual([run.id]);
      expect(list.items[0]).toMatchObject({ status, execution_id: run.execution_id, type: run.type });
    });

    it('lists every action run without a status, and refuses an unknown status', async () => {
      const list = await body(engine.admin('/admin/actions'));
      expect(list.items.map((r: { id: string }) => r.id).sort()).toEqual([failed.actions[0].id, succeeded.actions[0].id].sort());
      const { status, error } = await errorOf(engine.admin('/admin/actions?status=dead'));
      expect(status).toBe(400);
      expect(error.details).toEqual([expect.objectContaining({ path: 'status' })]);
    });

    it('answers 404 to a retry of an unknown action run', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/actions/00000000-0000-0000-0000-000000000000/retry', { method: 'POST' }));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
    });

    it('answers 409 not_retryable to a retry of a run that did not fail, and sends nothing', async () => {
      const posts = sim.requests.length;
      const { status, error } = await errorOf(engine.admin(`/admin/actions/${succeeded.actions[0].id}/retry`, { method: 'POST' }));
      expect(status).toBe(409);
      expect(error.code).toBe('not_retryable');
      await quietEngine(engine);
      expect(sim.requests.length).toBe(posts);
      expect((await body(engine.admin(`/admin/executions/${succeeded.id}`))).actions[0]).toMatchObject({ status: 'succeeded', attempts: 1 });
    });

    it('retries a failed run: it is sent again', async () => {
      const patches = () => sim.requests.filter((r) => r.method === 'PATCH' && r.path === '/v1/tasks/tsk_does_not_exist');
      expect(patches()).toHaveLength(1);
      const res = await engine.admin(`/admin/actions/${failed.actions[0].id}/retry`, { method: 'POST' });
      expect(res.status).toBe(200);
      expect(await body(res)).toMatchObject({ id: failed.actions[0].id, status: 'pending' });
      await waitUntil(() => patches().length === 2, { timeoutMs: 10_000, what: 'the retried request' });
      const execution = await waitUntil(
        async () => {
          const x = await body(engine.admin(`/admin/executions/${failed.id}`));
          return x.status === 'failed' && x;
        },
        { what: `execution ${failed.id} to fail again` },
      );
      expect(execution.actions[0]).toMatchObject({ status: 'failed', error: { code: 'not_found' } });
      expect(patches()[1].idempotencyKey).toBe(patches()[0].idempotencyKey);
    });
  });
});
