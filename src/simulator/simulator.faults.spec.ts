import { SlidingWindowLimiter, parseFaultSettings, takeScripted } from './simulator.faults.js';
import { startSimulator, type Simulator, type SimulatorOptions } from './simulator.js';

/** Parsed JSON of an answer; `any` keeps the assertions short. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (res: Response): Promise<any> => res.json();

const KEY = 'ac_live_faults';

async function call(sim: Simulator, method: string, path: string, body?: unknown, init: RequestInit = {}) {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json', ...(init.headers as object) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: init.signal,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}

const newTask = { project_id: 'prj_1', title: 'Faulty' };

describe(startSimulator.name, () => {
  let sim: Simulator;
  const start = async (options: SimulatorOptions = {}) => {
    sim = await startSimulator(options);
    return sim;
  };
  afterEach(async () => {
    await sim.close();
  });

  describe('rate limit', () => {
    it('counts down X-RateLimit-Remaining, then answers 429 with Retry-After', async () => {
      await start({ rateLimitPerMinute: 3 });
      const remaining = [];
      for (let i = 0; i < 3; i++) remaining.push((await call(sim, 'GET', '/users')).headers.get('x-ratelimit-remaining'));
      expect(remaining).toEqual(['2', '1', '0']);
      const refused = await call(sim, 'GET', '/users');
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('rate_limited');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(59);
    });

    it('lets requests through again once the oldest leaves the 60 s window', async () => {
      let now = Date.parse('2030-01-01T00:00:00Z');
      await start({ rateLimitPerMinute: 2, now: () => new Date(now) });
      await call(sim, 'GET', '/users');
      now += 30_000;
      await call(sim, 'GET', '/users');
      expect((await call(sim, 'GET', '/users')).headers.get('retry-after')).toBe('30');
      now += 30_000;
      expect((await call(sim, 'GET', '/users')).status).toBe(200);
    });

    it('counts each key on its own', async () => {
      await start({ rateLimitPerMinute: 1 });
      await call(sim, 'GET', '/users');
      const other = await call(sim, 'GET', '/users', undefined, { headers: { Authorization: 'Bearer ac_test_other' } });
      expect(other.status).toBe(200);
    });
  });

  describe('scripted faults', () => {
    it('answers the next 2 POST /v1/tasks with 500 and changes nothing', async () => {
      await start();
      sim.setFaults({ script: [{ status: 500, count: 2, method: 'POST', pathPrefix: '/tasks' }] });
      expect((await call(sim, 'GET', '/tasks')).status).toBe(200);
      const key = { headers: { 'Idempotency-Key': 'k-500' } };
      expect((await call(sim, 'POST', '/tasks', newTask, key)).status).toBe(500);
      expect((await call(sim, 'POST', '/tasks', newTask, key)).body.error.code).toBe('internal_error');
      expect(sim.state.tasks.size).toBe(3);
      expect(sim.webhooks).toHaveLength(0);
      expect(sim.effectsByIdempotencyKey.has('k-500')).toBe(false);
      // The script is spent and the failures were not stored: the retry really runs.
      expect((await call(sim, 'POST', '/tasks', newTask, key)).status).toBe(201);
      expect(sim.effectsByIdempotencyKey.get('k-500')).toBe(1);
    });

    it('answers 429 with the scripted Retry-After', async () => {
      await start();
      sim.setFaults({ script: [{ status: 429, retryAfter: 1 }] });
      const res = await call(sim, 'GET', '/users');
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.body.error.code).toBe('rate_limited');
    });

    it('answers 400 with the scripted error code, set over HTTP', async () => {
      await start();
      const body = { script: [{ status: 400, code: 'bad_title', message: 'title is not allowed' }] };
      const set = await fetch(`${sim.origin}/_sim/faults`, { method: 'POST', body: JSON.stringify(body) });
      expect(set.status).toBe(200);
      const res = await call(sim, 'POST', '/tasks', newTask);
      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({ code: 'bad_title', message: 'title is not allowed' });
      expect(sim.requests[0].fault).toBe('scripted');
    });

    it('delays an answer past a client timeout; the retry with the same key replays', async () => {
      await start();
      sim.setFaults({ script: [{ delayMs: 400, method: 'POST' }] });
      const headers = { 'Idempotency-Key': 'slow-1' };
      await expect(call(sim, 'POST', '/tasks', newTask, { headers, signal: AbortSignal.timeout(100) })).rejects.toThrow();
      // The server still finishes the slow request after the client gave up on it.
      while (sim.requests[0].status === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
      const retry = await call(sim, 'POST', '/tasks', newTask, { headers });
      expect(retry.status).toBe(201);
      expect(sim.effectsByIdempotencyKey.get('slow-1')).toBe(1);
      expect(sim.requests.map((r) => [r.fault, r.replayed])).toEqual([['delayed', undefined], [undefined, true]]);
    });

    it('drops the connection when asked, as a network failure', async () => {
      await start();
      sim.setFaults({ script: [{ dropConnection: true }] });
      await expect(call(sim, 'GET', '/users')).rejects.toThrow();
      expect((await call(sim, 'GET', '/users')).status).toBe(200);
    });

    it('refuses an invalid script naming the field', async () => {
      await start();
      const res = await fetch(`${sim.origin}/_sim/faults`, { method: 'POST', body: '{"script":[{"status":99}]}' });
      expect(res.status).toBe(400);
      expect((await json(res)).error.message).toContain('script[0].status');
    });
  });

  describe('error rate and latency', () => {
    it('fails every request at error rate 1, with no side effect', async () => {
      await start({ errorRate: 1 });
      const res = await call(sim, 'POST', '/tasks', newTask);
      expect(res.status).toBe(500);
      expect(res.headers.get('x-ratelimit-remaining')).not.toBeNull();
      expect(sim.state.tasks.size).toBe(3);
      expect(sim.requests[0].fault).toBe('random');
    });

    it('fails about the configured share of requests', async () => {
      const rolls = [0.1, 0.9, 0.2, 0.8];
      await start({ errorRate: 0.5, random: () => rolls.shift() ?? 1 });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await call(sim, 'GET', '/users')).status);
      expect(statuses).toEqual([500, 200, 500, 200]);
    });

    it('adds latency to every answer', async () => {
      await start();
      sim.setFaults({ latencyMs: 120 });
      const started = Date.now();
      await call(sim, 'GET', '/users');
      expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    });

    it('goes back to the start-up faults on reset', async () => {
      await start({ errorRate: 0 });
      sim.setFaults({ errorRate: 1, script: [{ status: 503 }] });
      sim.reset();
      expect(sim.faults).toEqual({ errorRate: 0, latencyMs: 0, script: [] });
    });
  });
});

describe(SlidingWindowLimiter.name, () => {
  it('names the wait until enough requests leave the window when the limit was lowered', () => {
    const limiter = new SlidingWindowLimiter(3);
    [0, 10_000, 20_000].forEach((t) => limiter.take('k', t));
    limiter.limit = 2;
    expect(limiter.take('k', 30_000)).toEqual({ allowed: false, limit: 2, remaining: 0, retryAfterSeconds: 40 });
  });
});

describe(takeScripted.name, () => {
  it('takes the first matching entry and removes it when spent', () => {
    const script = parseFaultSettings({ script: [{ status: 500, method: 'post' }, { status: 503, pathPrefix: 'tasks' }] }).script!;
    expect(takeScripted(script, 'GET', '/v1/tasks')?.status).toBe(503);
    expect(takeScripted(script, 'GET', '/v1/tasks')).toBeUndefined();
    expect(takeScripted(script, 'POST', '/v1/users')?.status).toBe(500);
    expect(script).toEqual([]);
  });
});
