/**
 * Hostile input over the real HTTP server, complementing intake.e2e-spec.ts
 * (which covers the SPEC's table of intake answers, signatures, 413 and deep
 * nesting). Here the hostile part travels further: through a rule and its
 * templates to the request sent to the service. Prototype keys, templates that
 * reach for `process`, `constructor` or `require`, template bombs, a 500 KB
 * title, oversized and garbage headers, wrong content types. Each gets the right
 * status and code, or the action fails with `template_error`, or the rule is
 * refused when it is created; afterwards nothing is polluted, no secret has
 * leaked, and the engine is healthy and still does its work.
 */
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { signBody } from '../src/intake/signature.js';
import type { Simulator } from '../src/simulator/simulator.js';
import { sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { TEST_ADMIN_TOKEN, TEST_API_KEY, TEST_SECRET, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { isWatched, SecretWatch, secretWatch } from './support/secret-watch.js';
import { waitUntil } from './support/wait.js';

const KB = 1024;

const kinds = await databasesUnderTest('hostile');

/** How a hostile template may end: refused when the rule is created, or failing its action at run time. */
type Outcome = 'refused' | 'template_error';

interface TemplateCase {
  name: string;
  /** The action's params (task.create). */
  params: Record<string, unknown>;
  /** The task in the event that triggers the rule (raw JSON text, so `__proto__` keys survive to the engine). */
  task?: string;
  /** The ways this may end; `sent` checks the request the service got. */
  expect: Outcome[] | { sent: (request: Record<string, unknown>) => void };
}

const PROTO_TASK =
  '{"id":"tsk_hostile","project_id":"prj_1","title":"__proto__",' +
  '"__proto__":{"polluted":"yes","title":"from the prototype"},' +
  '"constructor":{"prototype":{"polluted":"yes"}},"nested":{"__proto__":{"polluted":"yes"}}}';

const templateCases: TemplateCase[] = [
  {
    name: 'a title that is itself a template is sent as plain text, not rendered again',
    params: { project_id: 'prj_1', title: '{{ event.data.task.title }}' },
    task: JSON.stringify({ id: 'tsk_t', title: '{{ process.env.SERVICE_API_KEY }}{% for i in (1..3) %}x{% endfor %}' }),
    expect: { sent: (r) => expect(r.title).toBe('{{ process.env.SERVICE_API_KEY }}{% for i in (1..3) %}x{% endfor %}') },
  },
  {
    name: '__proto__ and constructor.prototype keys in the event reach no object and no request',
    params: { project_id: 'prj_1', title: 'Copy of {{ event.data.task.title }}', task: '{{ event.data.task }}' },
    task: PROTO_TASK,
    expect: {
      sent: (r) => {
        expect(r.title).toBe('Copy of __proto__');
        expect(JSON.stringify(r)).not.toContain('polluted');
        expect(Object.keys(r.task as object).sort()).toEqual(['id', 'nested', 'project_id', 'title']);
      },
    },
  },
  { name: '{{ event.data.__proto__ }}', params: { project_id: 'prj_1', title: '{{ event.data.__proto__ }}' }, task: PROTO_TASK, expect: ['refused', 'template_error'] },
  { name: '{{ event.data.task.__proto__.polluted }}', params: { project_id: 'prj_1', title: 'x{{ event.data.task.__proto__.polluted }}' }, task: PROTO_TASK, expect: ['refused', 'template_error'] },
  { name: '{{ event.constructor }}', params: { project_id: 'prj_1', title: '{{ event.constructor }}' }, expect: ['refused', 'template_error'] },
  { name: '{{ event.constructor.constructor }}', params: { project_id: 'prj_1', title: '{{ event.constructor.constructor }}' }, expect: ['refused', 'template_error'] },
  {
    name: "{{ event.constructor.constructor('return process')() }} written as a filter chain",
    params: { project_id: 'prj_1', title: '{{ event.constructor.constructor | append: "return process" }}' },
    expect: ['refused', 'template_error'],
  },
  { name: '{{ event.data.task.title.constructor }}', params: { project_id: 'prj_1', title: 'x{{ event.data.task.title.constructor }}' }, expect: ['refused', 'template_error'] },
  { name: '{{ rule.constructor.prototype }}', params: { project_id: 'prj_1', title: '{{ rule.constructor.prototype }}' }, expect: ['refused', 'template_error'] },
  { name: '{{ now.__proto__ }}', params: { project_id: 'prj_1', title: '{{ now.__proto__ }}' }, expect: ['refused', 'template_error'] },
  { name: '{{ process.env.SERVICE_API_KEY }}', params: { project_id: 'prj_1', title: '{{ process.env.SERVICE_API_KEY }}' }, expect: ['refused'] },
  { name: '{{ process.mainModule }} inside text', params: { project_id: 'prj_1', title: 'key: {{ process.mainModule }}' }, expect: ['refused'] },
  { name: '{{ global.process.env }}', params: { project_id: 'prj_1', title: '{{ global.process.env }}' }, expect: ['refused'] },
  { name: '{{ globalThis }}', params: { project_id: 'prj_1', title: '{{ globalThis }}' }, expect: ['refused'] },
  { name: '{{ require }}', params: { project_id: 'prj_1', title: "{{ require | append: 'child_process' }}" }, expect: ['refused'] },
  { name: '{{ this.constructor }}', params: { project_id: 'prj_1', title: '{{ this.constructor }}' }, expect: ['refused'] },
  { name: '{{ constructor }}', params: { project_id: 'prj_1', title: '{{ constructor }}' }, expect: ['refused'] },
  { name: '{{ actions.constructor }}', params: { project_id: 'prj_1', title: '{{ actions.constructor }}' }, expect: ['refused'] },
  { name: "{% include '/etc/passwd' %}", params: { project_id: 'prj_1', title: "{% include '/etc/passwd' %}" }, expect: ['refused'] },
  { name: "{% render 'x' %}", params: { project_id: 'prj_1', title: "{% render 'x' %}" }, expect: ['refused'] },
  { name: "{% layout 'x' %}", params: { project_id: 'prj_1', title: "{% layout 'x' %}" }, expect: ['refused'] },
  {
    name: 'a {% for %} bomb (a billion iterations)',
    params: { project_id: 'prj_1', title: '{% for a in (1..1000) %}{% for b in (1..1000) %}{% for c in (1..1000) %}x{% endfor %}{% endfor %}{% endfor %}' },
    expect: ['refused', 'template_error'],
  },
  {
    name: 'a string-doubling bomb (2^40 characters)',
    params: { project_id: 'prj_1', title: '{% assign s = "xxxxxxxxxxxxxxxx" %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}{{ s | size }}' },
    expect: ['refused', 'template_error'],
  },
  {
    name: '{{ event | json }} three hundred times over a 500 KB event',
    params: { project_id: 'prj_1', title: 'x', description: '{{ event | json }}'.repeat(300) },
    task: JSON.stringify({ id: 'tsk_json', title: 'y'.repeat(500 * KB) }),
    expect: ['refused', 'template_error'],
  },
  {
    name: 'a range over a huge number ({% for i in (1..999999999999) %})',
    params: { project_id: 'prj_1', title: '{% for i in (1..999999999999) %}{{ i }}{% endfor %}' },
    expect: ['refused', 'template_error'],
  },
];

/** What happened to an event, without its payload (which may be 500 KB): for assertions that print well. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function story(detail: any) {
  return {
    status: detail.status,
    error: detail.error,
    rules: detail.rules.map((r: { rule: string; outcome: string }) => `${r.rule}: ${r.outcome}`),
    executions: detail.executions.map((x: { status: string; actions: Array<{ status: string; error: { code: string } | null }> }) => ({
      status: x.status,
      actions: x.actions.map((a) => (a.error ? `${a.status} ${a.error.code}` : a.status)),
    })),
  };
}

/** A signed webhook whose `data.task` is exactly `task` (raw JSON text). */
function rawTaskEvent(id: string, type: string, task: string): string {
  return `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"created_at":"${new Date().toISOString()}","data":{"task":${task}}}`;
}

describe(SecretWatch.name, () => {
  const canary = 'canary-secret-value-0042';

  async function serve(answer: (res: import('node:http').ServerResponse) => void): Promise<{ url: string; close: () => void }> {
    const server = createServer((_req, res) => answer(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
  }

  it('is installed for every end-to-end file: fetch is watched and answers are scanned', async () => {
    expect(isWatched(globalThis.fetch)).toBe(true);
    const before = secretWatch.answersSeen;
    const server = await serve((res) => res.end('harmless'));
    await (await fetch(server.url)).text();
    server.close();
    expect(secretWatch.answersSeen).toBe(before + 1);
  });

  it('finds a watched value in an answer body and headers, and leaves the answer readable', async () => {
    const watch = new SecretWatch();
    watch.watchSecret(canary, 'the canary');
    const server = await serve((res) => {
      res.setHeader('X-Debug', `token=${canary}`);
      res.end(JSON.stringify({ echoed: canary }));
    });
    const res = await watch.wrap(globalThis.fetch)(`${server.url}/leaky`);
    expect(await res.json()).toEqual({ echoed: canary });
    server.close();
    expect(await watch.findings()).toEqual([
      { secret: 'the canary', where: expect.stringMatching(/^the headers of the answer 200 to GET http:.*\/leaky$/) },
      { secret: 'the canary', where: expect.stringMatching(/^the body of the answer 200 to GET http:.*\/leaky$/) },
    ]);
  });

  it('finds a watched value in a log written after it was registered, and nothing in a clean one', async () => {
    const watch = new SecretWatch();
    watch.watchSecret(canary, 'the canary');
    const leaky: string[] = [];
    watch.watchLog('a leaky engine', leaky);
    watch.watchLog('a careful engine', ['{"msg":"started"}\n', '{"msg":"Bearer [redacted]"}\n']);
    leaky.push(`{"msg":"calling with ${canary}"}\n`);
    expect(await watch.findings()).toEqual([{ secret: 'the canary', where: 'the log of a leaky engine' }]);
  });

  it('ignores values too short to be told from ordinary text', async () => {
    const watch = new SecretWatch();
    watch.watchSecret('abc');
    expect(watch.secretsIn('abc abc')).toEqual([]);
  });
});

/** A rule with nothing hostile about it: the engine must still do its work after each attack. */
const normal = {
  id: 'normal',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Normal: {{ event.id }}' } }],
};

describe.each(kinds)('hostile input on $name', (kind) => {
  const rig = useRig(kind, { per: 'block', engine: { rules: [normal], env: { LOG_LEVEL: 'info' } } });
  let sim: Simulator;
  let engine: RunningEngine;

  beforeAll(() => {
    ({ sim, engine } = rig);
  });

  /** Expects a normal event still to go all the way through to a task at the service. */
  async function stillWorks(): Promise<void> {
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    expect((await fetch(`${engine.url}/health/ready`)).status).toBe(200);
    const event = aTaskEvent('task.completed');
    expect((await deliver(engine.url, event)).status).toBe(202);
    await waitUntil(() => [...sim.state.tasks.values()].some((t) => t.title === `Normal: ${event.id}`), { what: 'the normal event to be acted on' });
  }

  describe('templates that reach for what they must not', () => {
    it.each(templateCases.map((c, i) => [c.name, i] as const))('%s', async (_, index) => {
      const c = templateCases[index];
      const type = `hostile.case${index}`;
      const rule = { id: `hostile-${index}`, on: type, actions: [{ type: 'task.create', params: c.params }] };
      const created = await engine.admin('/admin/rules', sendJson('POST', rule));
      const answer = await created.text();
      expect(answer).not.toContain(TEST_API_KEY);
      if (created.status === 400) {
        const { error } = JSON.parse(answer);
        expect(error.code).toBe('validation_failed');
        expect(error.details.length).toBeGreaterThan(0);
        expect(error.details.every((d: { path: string }) => d.path.startsWith('$.actions[0].params'))).toBe(true);
        expect(Array.isArray(c.expect) ? c.expect : 'sent').toContain('refused');
        return;
      }
      expect({ status: created.status, answer: answer.slice(0, 300) }).toEqual({ status: 201, answer: expect.any(String) });

      const id = `evt_hostile_${index}_${Date.now()}`;
      const task = c.task ?? JSON.stringify({ id: `tsk_case${index}`, project_id: 'prj_1', title: 'plain' });
      expect((await deliver(engine.url, rawTaskEvent(id, type, task))).status).toBe(202);
      const detail = await settledEvent(engine, id, 20_000);
      expect(story(detail)).toMatchObject({ status: 'processed', rules: [`${rule.id}: matched`], executions: [{ actions: [expect.any(String)] }] });
      const run = detail.executions[0].actions[0];
      if (Array.isArray(c.expect)) {
        expect({ status: run.status, code: run.error?.code }).toEqual({ status: 'failed', code: 'template_error' });
        expect(c.expect).toContain('template_error');
        expect(sim.requests.filter((r) => r.idempotencyKey === run.id)).toEqual([]); // nothing was sent for it
      } else {
        expect(run.status).toBe('succeeded');
        const sent = sim.requests.find((r) => r.idempotencyKey === run.id && r.status === 201);
        expect(sent).toBeDefined();
        c.expect.sent(sent!.body as Record<string, unknown>);
      }
      await engine.admin(`/admin/rules/hostile-${index}`, { method: 'DELETE' });
    }, 30_000);

    it('renders a 500 KB title into an action, whole', async () => {
      const rule = {
        id: 'big-title',
        on: 'hostile.big',
        actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Big: {{ event.data.task.title }}' } }],
      };
      expect((await engine.admin('/admin/rules', sendJson('POST', rule))).status).toBe(201);
      const title = `${'t'.repeat(500 * KB)}<end>`;
      const event = aTaskEvent('hostile.big', { title });
      expect((await deliver(engine.url, event)).status).toBe(202);
      const detail = await settledEvent(engine, event.id!, 20_000);
      expect(story(detail)).toEqual({ status: 'processed', error: null, rules: ['big-title: matched'], executions: [{ status: 'succeeded', actions: ['succeeded'] }] });
      const tasks = [...sim.state.tasks.values()].filter((t) => String(t.title).startsWith('Big: '));
      expect(tasks.map((t) => String(t.title).length)).toEqual([`Big: ${title}`.length]);
    }, 30_000);

    it('leaves no prototype polluted, leaks no key to the service, and keeps working', async () => {
      // The engine runs in this process, on the same globals as the test: a polluted prototype would show here.
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('polluted');
      expect(Object.getOwnPropertyNames(Array.prototype)).not.toContain('polluted');
      expect(JSON.stringify(sim.requests)).not.toContain(TEST_API_KEY);
      expect(JSON.stringify([...sim.state.tasks.values()])).not.toContain(TEST_API_KEY);
      expect(engine.logs.join('')).not.toContain(TEST_API_KEY);
      await stillWorks();
    }, 30_000);
  });

  describe('hostile requests', () => {
    const validEvent = () => JSON.stringify(aTaskEvent('task.created'));
    const signed = (text: string) => signBody(text, TEST_SECRET);

    interface RequestCase {
      name: string;
      path: string;
      method?: string;
      headers: () => Record<string, string>;
      body?: () => string | Buffer;
      /** One status, or several when the HTTP layer may answer before the engine sees the request. */
      status: number | number[];
      code?: string;
    }

    /** A webhook whose body is `bytes` as they are, signed over exactly those bytes. */
    const signedBytes = (contentType: string, bytes: Buffer, extra: Record<string, string> = {}): Pick<RequestCase, 'headers' | 'body'> => ({
      headers: () => ({ 'Content-Type': contentType, 'X-Service-Signature': signBody(bytes, TEST_SECRET), ...extra }),
      body: () => bytes,
    });

    const webhookWith = (contentType: string | null, text: string, signature = signed(text)): Pick<RequestCase, 'headers' | 'body'> => ({
      headers: () => ({ ...(contentType === null ? {} : { 'Content-Type': contentType }), 'X-Service-Signature': signature }),
      body: () => text,
    });

    const requestCases: RequestCase[] = [
      // Oversized and garbage signatures: refused, never a 500. Past Node's 16 KB header limit, Node answers 431 itself.
      { name: 'a 20 KB X-Service-Signature', path: '/webhooks', headers: () => ({ 'Content-Type': 'application/json', 'X-Service-Signature': 'a'.repeat(20 * KB) }), body: validEvent, status: [401, 431] },
      { name: 'a 12 KB X-Service-Signature', path: '/webhooks', headers: () => ({ 'Content-Type': 'application/json', 'X-Service-Signature': `sha256=${'0'.repeat(12 * KB)}` }), body: validEvent, status: 401, code: 'invalid_signature' },
      { name: 'a signature of latin-1 garbage', path: '/webhooks', headers: () => ({ 'Content-Type': 'application/json', 'X-Service-Signature': '\u00ff\u00fe'.repeat(100) }), body: validEvent, status: 401, code: 'invalid_signature' },
      { name: 'a timestamped-looking signature with 1000 v1= parts', path: '/webhooks', headers: () => ({ 'Content-Type': 'application/json', 'X-Service-Signature': `t=1,${'v1=00,'.repeat(1000)}` }), body: validEvent, status: 401, code: 'invalid_signature' },
      // Content types: the signature on the raw bytes is what authenticates a delivery, and the body must be a
      // JSON event whatever the header claims; a correctly signed JSON event is accepted under any content type.
      { name: 'a signed JSON event sent as text/plain', path: '/webhooks', ...webhookWith('text/plain', JSON.stringify(aTaskEvent('task.created'))), status: 202 },
      { name: 'a signed JSON event without a content type', path: '/webhooks', ...webhookWith(null, JSON.stringify(aTaskEvent('task.created'))), status: 202 },
      { name: 'a signed form body', path: '/webhooks', ...webhookWith('application/x-www-form-urlencoded', 'type=task.created&id=evt_form'), status: 400, code: 'invalid_json' },
      {
        name: 'a signed multipart body',
        path: '/webhooks',
        ...webhookWith('multipart/form-data; boundary=XyZ', '--XyZ\r\nContent-Disposition: form-data; name="type"\r\n\r\ntask.created\r\n--XyZ--\r\n'),
        status: 400,
        code: 'invalid_json',
      },
      {
        name: 'a signed UTF-16 body that claims to be JSON',
        path: '/webhooks',
        ...signedBytes('application/json; charset=utf-16', Buffer.from(`\ufeff${JSON.stringify(aTaskEvent('task.created'))}`, 'utf16le')),
        status: 400,
        code: 'invalid_json',
      },
      {
        name: 'a signed gzip body',
        path: '/webhooks',
        ...signedBytes('application/json', gzipSync(JSON.stringify(aTaskEvent('task.created'))), { 'Content-Encoding': 'gzip' }),
        status: 400,
        code: 'invalid_json',
      },
      // Admin routes with huge or garbage credentials.
      { name: 'an admin route with a 12 KB bearer token', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: `Bearer ${'A'.repeat(12 * KB)}` }), status: 401, code: 'unauthorized' },
      { name: 'an admin route with a 20 KB Authorization header', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: `Bearer ${'A'.repeat(20 * KB)}` }), status: [401, 431] },
      { name: 'an admin route with latin-1 garbage as the token', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: `Bearer ${'\u00ff\u0080'.repeat(500)}` }), status: 401, code: 'unauthorized' },
      { name: 'an admin route with 10 KB of spaces before the token', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: `Bearer${' '.repeat(10 * KB)}x` }), status: 401, code: 'unauthorized' },
      { name: 'an admin route with the token twice', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN} ${TEST_ADMIN_TOKEN}` }), status: 401, code: 'unauthorized' },
      { name: 'an admin route with the token and no scheme', path: '/admin/events', method: 'GET', headers: () => ({ Authorization: TEST_ADMIN_TOKEN }), status: 401, code: 'unauthorized' },
      { name: 'an admin route with the webhook signature instead of a token', path: '/admin/events', method: 'GET', headers: () => ({ 'X-Service-Signature': signed('') }), status: 401, code: 'unauthorized' },
      // Admin routes with a good token and bad bodies or queries.
      { name: 'a rule sent as text/plain but not JSON', path: '/admin/rules', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'Content-Type': 'text/plain' }), body: () => 'id: x', status: 400, code: 'invalid_json' },
      { name: 'a rule nested 10,000 levels deep', path: '/admin/rules', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'Content-Type': 'application/json' }), body: () => `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`, status: 400 },
      { name: 'an injected event of 2 MiB', path: '/admin/events', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'Content-Type': 'application/json' }), body: () => JSON.stringify({ type: 'x', data: { pad: 'p'.repeat(2 * 1024 * KB) } }), status: 413, code: 'payload_too_large' },
      { name: 'an event id of 10 KB in the path', path: `/admin/events/${'e'.repeat(10 * KB)}`, method: 'GET', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}` }), status: 404, code: 'not_found' },
      { name: 'a garbage cursor', path: `/admin/events?cursor=${'%ff'.repeat(300)}`, method: 'GET', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}` }), status: 400, code: 'validation_failed' },
      { name: 'a limit past any number', path: `/admin/events?limit=${'9'.repeat(400)}`, method: 'GET', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}` }), status: 400, code: 'validation_failed' },
      { name: 'a query with the same key 1000 times', path: `/admin/events?${'status=failed&'.repeat(1000)}`, method: 'GET', headers: () => ({ Authorization: `Bearer ${TEST_ADMIN_TOKEN}` }), status: 400, code: 'validation_failed' },
    ];

    it.each(requestCases.map((c, i) => [c.name, i] as const))('%s', async (_, index) => {
      const c = requestCases[index];
      const res = await fetch(`${engine.url}${c.path}`, { method: c.method ?? 'POST', headers: c.headers(), body: c.body?.() });
      const statuses = Array.isArray(c.status) ? c.status : [c.status];
      const text = await res.text();
      // The answer's start is in the comparison, so a failure shows what came back.
      expect({ status: res.status, text: text.slice(0, 300) }).toEqual({ status: statuses.includes(res.status) ? res.status : statuses, text: expect.any(String) });
      if (res.status === 431) return; // answered by Node's HTTP parser, before the engine: no body
      if (res.status >= 400) {
        const answer = JSON.parse(text);
        expect(Object.keys(answer)).toEqual(['error']);
        if (c.code !== undefined) expect(answer.error.code).toBe(c.code);
        expect(text).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);
      }
      expect(res.status).not.toBe(500);
    }, 30_000);

    it('is healthy afterwards and still processes a normal event', async () => {
      await stillWorks();
      // The refused admin requests above were not logged with what they carried.
      expect(engine.logs.join('')).not.toContain('A'.repeat(100));
    }, 30_000);

    it('logged no error of its own through all of the above (no 500, no crash caught at the boundary)', () => {
      expect(engine.logs.filter((line) => line.includes('"level":"error"'))).toEqual([]);
    });
  });
});
