import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ManualClock } from '../../test/support/storage.js';
import { loadConfig } from '../config/config.js';
import { systemClock, type Clock } from '../clock.js';
import { buildRequest } from './service-operations.js';
import { ServiceClient, USER_AGENT } from './service-client.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface Seen {
  req: IncomingMessage;
  body: string;
  /** When the request arrived, on the clock the service was given. */
  at: number;
}

/** A real HTTP server standing in for the service, answering as `handler` says. */
async function service(handler: Handler, now: () => number = Date.now): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ req, body, at: now() });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const close = () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
  return { url: `http://127.0.0.1:${port}`, seen, close };
}

function clientFor(url: string, env: Record<string, string> = {}, clock: Clock = systemClock) {
  const config = loadConfig({ SERVICE_API_URL: url, SERVICE_API_KEY: 'ac_test_client_spec_key', SERVICE_TIMEOUT_MS: '300', ...env }, () => 'x'.repeat(20));
  return new ServiceClient(config, clock);
}

/**
 * A client on a clock the test moves, whose rate budget waits by moving that
 * clock instead of sleeping (RateBudget.acquire takes the sleep to use): every
 * hold is recorded in `held`, and takes no time.
 */
function clientOnManualClock(url: string, clock = new ManualClock()) {
  const client = clientFor(url, {}, clock);
  const held: number[] = [];
  const acquire = client.budget.acquire.bind(client.budget);
  client.budget.acquire = () =>
    acquire(async (ms) => {
      held.push(ms);
      clock.advance(ms);
    });
  return { client, held };
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe(ServiceClient.name, () => {
  describe('requests', () => {
    it('sends every header the service expects, and an Idempotency-Key on writes only', async () => {
      const svc = await service((_req, res) => json(res, 201, { id: 'tsk_9' }));
      const client = clientFor(svc.url);
      await client.send(buildRequest('tasks.create', {}, { project_id: 'prj_1', title: 'x' }), 'key-1');
      await client.send(buildRequest('tasks.list', {}, undefined, { project_id: 'prj_1' }), 'key-2');
      const [write, read] = svc.seen;
      expect(write.req.url).toBe('/v1/tasks');
      expect(write.req.headers).toMatchObject({
        authorization: 'Bearer ac_test_client_spec_key',
        'content-type': 'application/json',
        accept: 'application/json',
        'user-agent': USER_AGENT,
        'idempotency-key': 'key-1',
      });
      expect(JSON.parse(write.body)).toEqual({ project_id: 'prj_1', title: 'x' });
      expect(read.req.url).toBe('/v1/tasks?project_id=prj_1');
      expect(read.req.headers['idempotency-key']).toBeUndefined();
      await svc.close();
    });
  });

  describe('answers', () => {
    it('keeps a JSON answer as parsed and as the text that came, and an answer that is not JSON as text only', async () => {
      const text = '{ "id": "tsk_9",\n  "title": "x" }';
      const svc = await service((req, res) => {
        res.writeHead(201, { 'Content-Type': req.url?.startsWith('/v1/tasks?') ? 'text/plain' : 'application/json' });
        res.end(req.url?.startsWith('/v1/tasks?') ? 'not json' : text);
      });
      const client = clientFor(svc.url);
      expect(await client.send(buildRequest('tasks.create', {}, { project_id: 'prj_1', title: 'x' }), 'k')).toEqual({
        ok: true, status: 201, body: { id: 'tsk_9', title: 'x' }, bodyJson: text,
      });
      expect(await client.send(buildRequest('tasks.list', {}, undefined, { project_id: 'prj_1' }))).toEqual({ ok: true, status: 201, body: 'not json' });
      await svc.close();
    });

    it('keeps the error code and message of the service’s error shape', async () => {
      const svc = await service((_req, res) => json(res, 422, { error: { code: 'bad_title', message: 'too long' } }));
      const outcome = await clientFor(svc.url).send(buildRequest('tasks.create', {}, {}), 'k');
      expect(outcome).toMatchObject({ ok: false, kind: 'http', status: 422, code: 'bad_title', message: 'too long' });
      await svc.close();
    });

    it('reports a timeout, and gives up the request, when the service does not answer in SERVICE_TIMEOUT_MS', async () => {
      // The service never answers; it only notes when the client goes away.
      let clientGone: () => void = () => undefined;
      const gone = new Promise<void>((resolve) => (clientGone = resolve));
      const svc = await service((_req, res) => res.on('close', () => clientGone()));
      const outcome = await clientFor(svc.url).send(buildRequest('tasks.list'));
      expect(outcome).toEqual({ ok: false, kind: 'timeout', code: 'timeout', message: 'no answer within 300 ms' });
      await gone; // the client aborted the request: the connection closed with no answer written
      expect(svc.seen).toHaveLength(1);
      await svc.close();
    });

    it('reports a network error when nothing listens', async () => {
      const outcome = await clientFor('http://127.0.0.1:9').send(buildRequest('tasks.list'));
      expect(outcome).toMatchObject({ ok: false, kind: 'network', code: 'network_error', message: expect.stringContaining('ECONNREFUSED') });
    });

    it('reports a network error when the connection closes before an answer, and when it cuts the answer off', async () => {
      const closed = await service((req) => req.socket.destroy());
      expect(await clientFor(closed.url).send(buildRequest('tasks.list'))).toMatchObject({ ok: false, kind: 'network', code: 'network_error' });
      await closed.close();
      const cut = await service((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '100' });
        res.write('{"data": [', () => res.socket?.destroy());
      });
      const outcome = await clientFor(cut.url).send(buildRequest('tasks.list'));
      expect(outcome).toMatchObject({ ok: false, kind: 'network', code: 'network_error', message: expect.stringMatching(/^answer cut off: /) });
      await cut.close();
    });

    it('keeps its connections for the next requests (keep-alive)', async () => {
      const svc = await service((_req, res) => json(res, 200, {}));
      const client = clientFor(svc.url);
      for (let i = 0; i < 10; i++) expect(await client.send(buildRequest('tasks.list'))).toMatchObject({ ok: true });
      expect(svc.seen).toHaveLength(10);
      // undici's pool takes a connection as free again only once the next request has gone out on another: one after
      // another, requests take turns on two connections, each kept open.
      expect(new Set(svc.seen.map(({ req }) => req.socket.remotePort)).size).toBeLessThanOrEqual(2);
      await svc.close();
    });
  });

  describe('the rate limit the service announces', () => {
    it('holds every further call after X-RateLimit-Remaining: 0 until Retry-After has passed', async () => {
      let calls = 0;
      const clock = new ManualClock();
      const svc = await service(
        (_req, res) => json(res, 200, {}, calls++ === 0 ? { 'X-RateLimit-Remaining': '0', 'Retry-After': '1' } : { 'X-RateLimit-Remaining': '99' }),
        () => clock.now().getTime(),
      );
      const { client, held } = clientOnManualClock(svc.url, clock);
      await client.send(buildRequest('tasks.list'));
      expect(client.lastRemaining).toBe(0);
      expect(client.budget.pausedUntil()).toBe(clock.now().getTime() + 1_000);
      await client.send(buildRequest('tasks.list'));
      expect(held).toEqual([1_000]);
      expect(svc.seen.map((s) => s.at - svc.seen[0].at)).toEqual([0, 1_000]);
      expect(client.lastRemaining).toBe(99);
      expect(client.budget.pausedUntil()).toBeUndefined();
      await svc.close();
    });

    it('fails a lookup that would wait longer than lookupWaitMs, sending nothing', async () => {
      const svc = await service((_req, res) => json(res, 200, {}));
      const client = clientFor(svc.url);
      client.lookupWaitMs = 50;
      client.budget.pauseFor(5_000);
      const started = performance.now();
      const outcome = await client.send(buildRequest('tasks.list'));
      expect(outcome).toMatchObject({ ok: false, kind: 'timeout', code: 'rate_budget_wait' });
      expect(outcome.ok === false && outcome.message).toMatch(/^not sent: the rate budget has no slot free for \d+ ms/);
      expect(performance.now() - started).toBeLessThan(40); // refused at once, not after waiting
      expect(svc.seen).toHaveLength(0);
      await svc.close();
    });

    it('lets an action attempt take its slot without waiting, and says how long until the next', async () => {
      const client = clientFor('http://127.0.0.1:9', { SERVICE_RATE_LIMIT_PER_MINUTE: '1' });
      expect(await client.takeSlot()).toBe(0);
      expect(await client.takeSlot()).toBeGreaterThan(59_000);
    });

    it('does not hold calls while the service still has quota', async () => {
      const svc = await service((_req, res) => json(res, 200, {}, { 'X-RateLimit-Remaining': '5' }));
      const { client, held } = clientOnManualClock(svc.url);
      for (let i = 0; i < 5; i++) await client.send(buildRequest('tasks.list'));
      expect(held).toEqual([]);
      expect(svc.seen).toHaveLength(5);
      expect(client.budget.pausedUntil()).toBeUndefined();
      expect(client.lastRemaining).toBe(5);
      await svc.close();
    });
  });
});
