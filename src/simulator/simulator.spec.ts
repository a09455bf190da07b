import { startSimulator, type Simulator } from './simulator.js';

/** Parsed JSON of an answer; `any` keeps the assertions short. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (res: Response): Promise<any> => res.json();

const KEY = 'ac_test_spec';

interface Reply {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function call(sim: Simulator, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}

describe(startSimulator.name, () => {
  let sim: Simulator;
  beforeEach(async () => {
    sim = await startSimulator({ workflowRunDelayMs: 10 });
  });
  afterEach(async () => {
    await sim.close();
  });

  describe('addresses', () => {
    it('gives a base url that ends in /v1 and an origin without it', () => {
      expect(sim.url).toBe(`${sim.origin}/v1`);
      expect(sim.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    });
  });

  describe('authentication', () => {
    it.each([
      ['no Authorization header', undefined],
      ['a key of another kind', 'Bearer sk_live_123'],
      ['a key without Bearer', 'ac_live_123'],
      ['a bare prefix', 'Bearer ac_test_'],
    ])('rejects %s with 401 unauthorized', async (_case, authorization) => {
      const res = await fetch(`${sim.url}/users`, { headers: authorization ? { Authorization: authorization } : {} });
      expect(res.status).toBe(401);
      expect((await json(res)).error.code).toBe('unauthorized');
      expect(res.headers.get('x-ratelimit-remaining')).not.toBeNull();
    });

    it.each(['ac_live_abc', 'ac_test_abc'])('accepts a %s key', async (key) => {
      const res = await call(sim, 'GET', '/users', undefined, { Authorization: `Bearer ${key}` });
      expect(res.status).toBe(200);
    });

    it('logs whether a key came, never the key', async () => {
      await call(sim, 'GET', '/users');
      expect(sim.requests[0]).toMatchObject({ method: 'GET', path: '/v1/users', hasAuthorization: true, keyMode: 'test' });
      expect(JSON.stringify(sim.requests)).not.toContain(KEY);
    });

    it('logs when it answered, at or after the request came (one clock: the order two requests were served in)', async () => {
      await call(sim, 'GET', '/users');
      const [logged] = sim.requests;
      expect(logged?.answeredAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(logged!.answeredAt! >= logged!.time).toBe(true);
    });
  });

  describe('users', () => {
    it('lists the seeded users under data', async () => {
      const res = await call(sim, 'GET', '/users');
      expect(res.body.data.map((u: { id: string }) => u.id)).toEqual(['usr_1', 'usr_2']);
    });

    it('invites, retrieves and removes a user', async () => {
      const invited = await call(sim, 'POST', '/users', { email: 'lin@example.com', role: 'admin' });
      expect(invited.status).toBe(201);
      expect(invited.body).toMatchObject({ id: 'usr_3', email: 'lin@example.com', role: 'admin', status: 'invited' });
      expect((await call(sim, 'GET', '/users/usr_3')).body.email).toBe('lin@example.com');
      expect((await call(sim, 'DELETE', '/users/usr_3')).status).toBe(200);
      expect((await call(sim, 'GET', '/users/usr_3')).status).toBe(404);
    });

    it('refuses an invitation without an email', async () => {
      const res = await call(sim, 'POST', '/users', { role: 'member' });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(sim.state.users.size).toBe(2);
    });
  });

  describe('projects', () => {
    it('creates, updates and archives a project', async () => {
      const created = await call(sim, 'POST', '/projects', { name: 'Docs' });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ id: 'prj_3', name: 'Docs', status: 'active' });
      const updated = await call(sim, 'PATCH', '/projects/prj_3', { name: 'Documentation' });
      expect(updated.body.name).toBe('Documentation');
      const archived = await call(sim, 'DELETE', '/projects/prj_3');
      expect(archived.status).toBe(200);
      expect(archived.body).toMatchObject({ id: 'prj_3', status: 'archived' });
      expect(sim.state.projects.get('prj_3')?.status).toBe('archived');
    });

    it('answers 404 not_found for an unknown project', async () => {
      const res = await call(sim, 'PATCH', '/projects/prj_404', { name: 'x' });
      expect(res.status).toBe(404);
      expect(res.body.error).toEqual({ code: 'not_found', message: expect.any(String) });
    });
  });

  describe('tasks', () => {
    it('filters the list by project_id', async () => {
      const res = await call(sim, 'GET', '/tasks?project_id=prj_2');
      expect(res.body.data.map((t: { id: string }) => t.id)).toEqual(['tsk_3']);
      expect((await call(sim, 'GET', '/tasks')).body.data).toHaveLength(3);
    });

    it('creates a task with status open by default', async () => {
      const res = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Write tests', priority: 'high' });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ id: 'tsk_4', project_id: 'prj_1', title: 'Write tests', status: 'open', priority: 'high' });
    });

    it.each([
      ['no title', { project_id: 'prj_1' }],
      ['no project_id', { title: 'x' }],
      ['a project that does not exist', { project_id: 'prj_404', title: 'x' }],
    ])('refuses a task with %s', async (_case, body) => {
      const res = await call(sim, 'POST', '/tasks', body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(sim.state.tasks.size).toBe(3);
    });

    describe('due_date and priority', () => {
      it('gives a new task no due date and normal priority, as the seeded ones have', async () => {
        const res = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Plain' });
        expect(res.body).toMatchObject({ due_date: null, priority: 'normal' });
        const seeded = (await call(sim, 'GET', '/tasks')).body.data;
        expect(seeded.map((t: { due_date: unknown; priority: unknown }) => [t.due_date, t.priority])).toEqual([
          [null, 'normal'], [null, 'normal'], [null, 'normal'], [null, 'normal'],
        ]);
      });

      it('accepts them on create and update, and lists them filtered by project', async () => {
        const created = await call(sim, 'POST', '/tasks', { project_id: 'prj_2', title: 'Due', due_date: '2026-11-30', priority: 'low' });
        expect(created.status).toBe(201);
        const updated = await call(sim, 'PATCH', `/tasks/${created.body.id}`, { due_date: '2026-12-01', priority: 'urgent' });
        expect(updated.body).toMatchObject({ due_date: '2026-12-01', priority: 'urgent' });
        const cleared = await call(sim, 'PATCH', `/tasks/${created.body.id}`, { due_date: null });
        expect(cleared.body).toMatchObject({ due_date: null, priority: 'urgent' });
        const listed = (await call(sim, 'GET', '/tasks?project_id=prj_2')).body.data;
        expect(listed.map((t: { id: string; due_date: unknown; priority: string }) => [t.id, t.due_date, t.priority])).toEqual([
          ['tsk_3', null, 'normal'], [created.body.id, null, 'urgent'],
        ]);
      });

      it.each([
        ['POST', '/tasks', { project_id: 'prj_1', title: 'x', priority: 'critical' }, 'priority must be one of low, normal, high, urgent (got "critical")'],
        ['POST', '/tasks', { project_id: 'prj_1', title: 'x', due_date: '30.11.2026' }, 'due_date must be an ISO date such as 2026-11-30, or null (got "30.11.2026")'],
        ['PATCH', '/tasks/tsk_1', { priority: 'HIGH' }, 'priority must be one of low, normal, high, urgent (got "HIGH")'],
        ['PATCH', '/tasks/tsk_1', { title: 'Also refused', due_date: '2026-02-30' }, 'due_date must be an ISO date such as 2026-11-30, or null (got "2026-02-30")'],
      ])('refuses %s %s with a bad value, changing nothing', async (method, path, body, message) => {
        const before = JSON.stringify(sim.state.snapshot());
        const res = await call(sim, method, path, body);
        expect(res.status).toBe(400);
        expect(res.body.error).toEqual({ code: 'validation_failed', message });
        expect(JSON.stringify(sim.state.snapshot())).toBe(before);
      });
    });

    it('leaves the tasks of an archived project as they were', async () => {
      const before = structuredClone([...sim.state.tasks.values()]);
      expect((await call(sim, 'DELETE', '/projects/prj_1')).body).toMatchObject({ id: 'prj_1', status: 'archived' });
      expect([...sim.state.tasks.values()]).toEqual(before);
      expect((await call(sim, 'GET', '/tasks?project_id=prj_1')).body.data).toHaveLength(2);
    });

    it('updates and deletes a task', async () => {
      const updated = await call(sim, 'PATCH', '/tasks/tsk_1', { status: 'in_progress' });
      expect(updated.body).toMatchObject({ id: 'tsk_1', status: 'in_progress' });
      expect((await call(sim, 'DELETE', '/tasks/tsk_1')).body).toEqual({ id: 'tsk_1', deleted: true });
      expect(sim.state.tasks.has('tsk_1')).toBe(false);
    });
  });

  describe('workflows', () => {
    it('lists workflows including wf_notify', async () => {
      const res = await call(sim, 'GET', '/workflows');
      expect(res.body.data.map((w: { id: string }) => w.id)).toContain('wf_notify');
    });

    it('starts a run on trigger and completes it shortly after', async () => {
      const res = await call(sim, 'POST', '/workflows/wf_notify/trigger', { task_id: 'tsk_1' });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ workflow_id: 'wf_notify', status: 'running', input: { task_id: 'tsk_1' } });
      await sim.waitForIdle();
      expect(sim.state.workflowRuns.get(res.body.id)?.status).toBe('completed');
    });

    it('answers 404 for an unknown workflow', async () => {
      expect((await call(sim, 'POST', '/workflows/wf_nope/trigger', {})).status).toBe(404);
    });
  });

  describe('malformed requests', () => {
    it('answers 400 invalid_json to a body that is not JSON, changing nothing', async () => {
      const res = await call(sim, 'POST', '/tasks', '{"title": ');
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_json');
      expect(sim.state.tasks.size).toBe(3);
    });

    it.each([['GET', '/v1/nothing'], ['PUT', '/v1/tasks/tsk_1'], ['GET', '/elsewhere']])(
      'answers 404 in the error shape to %s %s',
      async (method, path) => {
        const res = await fetch(`${sim.origin}${path}`, { method, headers: { Authorization: `Bearer ${KEY}` } });
        expect(res.status).toBe(404);
        expect((await json(res)).error.code).toBe('not_found');
      },
    );
  });

  describe('idempotency', () => {
    it('replays the first answer for a repeated key with no second effect or webhook', async () => {
      const headers = { 'Idempotency-Key': 'run-1' };
      const first = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Once' }, headers);
      const second = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Once' }, headers);
      expect(second.status).toBe(first.status);
      expect(second.body).toEqual(first.body);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(sim.state.tasks.size).toBe(4);
      expect(sim.effectsByIdempotencyKey.get('run-1')).toBe(1);
      expect(sim.webhooks.filter((w) => w.event.type === 'task.created')).toHaveLength(1);
      expect(sim.requests.map((r) => r.replayed)).toEqual([undefined, true]);
    });

    it('refuses the same key for a different request', async () => {
      const headers = { 'Idempotency-Key': 'run-2' };
      await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'A' }, headers);
      const res = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'B' }, headers);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('idempotency_key_reused');
    });

    it('does not keep a failed answer, so a corrected retry runs', async () => {
      const headers = { 'Idempotency-Key': 'run-3' };
      expect((await call(sim, 'DELETE', '/tasks/tsk_9', undefined, headers)).status).toBe(404);
      sim.state.tasks.set('tsk_9', { ...sim.state.tasks.get('tsk_1')!, id: 'tsk_9' });
      expect((await call(sim, 'DELETE', '/tasks/tsk_9', undefined, headers)).status).toBe(200);
    });
  });

  describe('control endpoints', () => {
    it('shows requests, state and effects, and resets everything', async () => {
      await call(sim, 'POST', '/projects', { name: 'Temp' }, { 'Idempotency-Key': 'k1' });
      const get = async (path: string) => json(await fetch(`${sim.origin}/_sim/${path}`));
      expect((await get('requests')).data).toHaveLength(1);
      const state = await get('state');
      expect(state.projects).toHaveLength(3);
      expect(state.effects_by_idempotency_key).toEqual({ k1: 1 });
      expect((await fetch(`${sim.origin}/_sim/reset`, { method: 'POST' })).status).toBe(200);
      expect(sim.state.projects.size).toBe(2);
      expect(sim.requests).toHaveLength(0);
      expect((await call(sim, 'POST', '/projects', { name: 'Again' })).body.id).toBe('prj_3');
    });

    it('starts empty when asked not to seed', async () => {
      const empty = await startSimulator({ seed: false });
      try {
        expect((await call(empty, 'GET', '/tasks')).body).toEqual({ data: [] });
      } finally {
        await empty.close();
      }
    });
  });
});
