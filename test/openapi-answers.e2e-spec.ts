/**
 * Every answer the engine really gives is declared in its own OpenAPI document
 * (/docs-json): each admin route, POST /webhooks and the health routes are
 * driven through each answer they can give (successes, 400 with details, 401,
 * 404, 409, 413, 503, the 200 of an event id seen before), and each answer's
 * status must be declared for its operation and its body must fit the declared
 * schema. The last test turns it round: every declared answer was seen.
 */
import { startSimulator } from '../src/simulator/simulator.js';
import { signBody } from '../src/intake/signature.js';
import { settledEvent } from './support/admin.js';
import { databasesUnderTest, type DatabaseKindUnderTest } from './support/databases.js';
import { rulesDir, startEngine, TEST_SECRET, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body as jsonOf } from './support/events.js';
import { answerProblems, operationPath, type OpenApiDocument } from './support/openapi-answers.js';
import { reviewRelease, updateMissing } from './support/rules-harness.js';
import { waitUntil } from './support/wait.js';

const MAX_BYTES = 16_384;
const OVERSIZED = JSON.stringify({ type: 'task.created', data: { pad: 'p'.repeat(4 * MAX_BYTES) } });

/** Declared answers no test here can bring about cheaply, and why. */
const NOT_DRIVEN = new Set([
  'GET /health/ready 503', // needs a database that refuses writes: test/storage-faults.e2e-spec.ts
]);
/** A write refused while the database refuses writes: driven in test/storage-faults.e2e-spec.ts (an admin injection there). */
const refusedWrite = (answer: string) => /^(POST|PUT|DELETE) \/admin\/\S+ 503$/.test(answer);

const apiRule = { id: 'api-rule', on: 'task.created', actions: [{ type: 'task.delete', params: { id: '{{ event.data.task.id }}' } }] };

interface Answer {
  status: number;
  body: unknown;
  problems: string[];
}

interface Call {
  body?: string;
  headers?: Record<string, string>;
  /** false: no Authorization header; a string: that token. */
  token?: string | false;
  /** Another engine's address. */
  base?: string;
}

const kinds = await databasesUnderTest('OpenAPI answers');

describe.each(kinds)('every answer on $name is declared in the OpenAPI document', (kind: DatabaseKindUnderTest) => {
  let engine: RunningEngine;
  let document: OpenApiDocument;
  const cleanups: Array<() => Promise<unknown>> = [];
  /** `METHOD /template status` of every answer seen, for the last test. */
  const seen = new Set<string>();

  beforeAll(async () => {
    const db = await kind.create();
    const sim = await startSimulator({ seed: true });
    engine = await startEngine({
      DATABASE_URL: db.url,
      SERVICE_API_URL: sim.url,
      RULES_DIR: rulesDir([reviewRelease, updateMissing]),
      WEBHOOK_MAX_BYTES: String(MAX_BYTES),
    });
    cleanups.push(() => engine.stop(), () => sim.close(), () => db.drop());
    document = (await jsonOf(fetch(`${engine.url}/docs-json`))) as OpenApiDocument;
  });

  afterAll(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => undefined);
  });

  /** Sends one request, reads the answer and measures it against the document. */
  async function answer(method: string, path: string, call: Call = {}): Promise<Answer> {
    const token = call.token ?? engine.config.adminToken;
    const res = await fetch(`${call.base ?? engine.url}${path}`, {
      method,
      body: call.body,
      headers: { 'Content-Type': 'application/json', ...(token === false ? {} : { Authorization: `Bearer ${token}` }), ...call.headers },
    });
    const text = await res.text();
    const body: unknown = text === '' ? undefined : /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text;
    const template = operationPath(document, method, path);
    if (template !== undefined) seen.add(`${method} ${template} ${res.status}`);
    return { status: res.status, body, problems: answerProblems(document, method, path, res.status, body) };
  }

  /** The status and error code expected, and no problem with the document. */
  function expectAnswer(got: Answer, status: number, code?: string) {
    // Only an error answer's `error` is an error code: an action run's `error` is what the service said.
    const gotCode = got.status >= 400 ? (got.body as { error?: { code?: string } } | undefined)?.error?.code : undefined;
    expect({ status: got.status, code: gotCode, problems: got.problems }).toEqual({ status, code, problems: [] });
  }

  const json = (value: unknown) => JSON.stringify(value);
  const webhook = (text: string, signature: string | null = signBody(text, TEST_SECRET)): Call => ({
    body: text,
    token: false,
    headers: signature === null ? {} : { 'X-Service-Signature': signature },
  });

  describe('the checker', () => {
    it('reports an undeclared status, a body that does not fit, and a route the document lacks', () => {
      expect(answerProblems(document, 'GET', '/health', 418, { status: 'ok' })).toEqual([expect.stringMatching(/^GET \/health 418: status 418 is not declared/)]);
      expect(answerProblems(document, 'POST', '/admin/events', 202, { id: 7 })).toEqual([
        expect.stringContaining('must have required property'),
        expect.stringContaining('/id must be string'),
      ]);
      expect(answerProblems(document, 'PATCH', '/admin/rules/x', 200, {})).toEqual([expect.stringContaining('no operation PATCH')]);
      expect(answerProblems(document, 'DELETE', '/admin/rules/x', 204, { unexpected: true })).toEqual([expect.stringContaining('declares none')]);
    });

    it('matches a literal path before a template', () => {
      expect(operationPath(document, 'POST', '/admin/rules/validate')).toBe('/admin/rules/validate');
      expect(operationPath(document, 'GET', '/admin/rules/validate')).toBe('/admin/rules/{id}');
      expect(operationPath(document, 'GET', '/admin/events/evt%201?x=1')).toBe('/admin/events/{id}');
    });
  });

  describe('POST /webhooks', () => {
    const event = aTaskEvent('task.created');

    it('202 for a new event, 200 for the same id again', async () => {
      expectAnswer(await answer('POST', '/webhooks', webhook(json(event))), 202);
      expectAnswer(await answer('POST', '/webhooks', webhook(json(event))), 200);
    });

    it('401 without a signature and with a wrong one', async () => {
      expectAnswer(await answer('POST', '/webhooks', webhook(json(aTaskEvent('task.created')), null)), 401, 'missing_signature');
      expectAnswer(await answer('POST', '/webhooks', webhook(json(aTaskEvent('task.created')), 'sha256=00')), 401, 'invalid_signature');
    });

    it('400 for a body that is not JSON or not an event', async () => {
      expectAnswer(await answer('POST', '/webhooks', webhook('{not json')), 400, 'invalid_json');
      expectAnswer(await answer('POST', '/webhooks', webhook(json({ data: {} }))), 400, 'invalid_event');
    });

    it('413 for a body over WEBHOOK_MAX_BYTES', async () => {
      expectAnswer(await answer('POST', '/webhooks', webhook(OVERSIZED)), 413, 'payload_too_large');
    });

    it('503 when no WEBHOOK_SECRET is configured', async () => {
      const db = await kind.create();
      const unconfigured = await startEngine({ DATABASE_URL: db.url, RULES_DIR: rulesDir([]), WEBHOOK_SECRET: '' });
      cleanups.push(() => unconfigured.stop(), () => db.drop());
      expectAnswer(await answer('POST', '/webhooks', { ...webhook(json(event)), base: unconfigured.url }), 503, 'webhook_secret_not_configured');
    });
  });

  describe('health and metrics', () => {
    it.each(['/health', '/health/ready', '/metrics'])('200 for GET %s', async (path) => {
      expectAnswer(await answer('GET', path, { token: false }), 200);
    });
  });

  describe('the admin token', () => {
    it.each<[string, string | false]>([
      ['no token', false],
      ['a wrong token', 'not-the-admin-token-at-all'],
    ])('401 from every admin operation with %s', async (_name, token) => {
      const answers: Array<[string, number, string[]]> = [];
      for (const [template, operations] of Object.entries(document.paths)) {
        if (!template.startsWith('/admin')) continue;
        for (const method of Object.keys(operations)) {
          const got = await answer(method.toUpperCase(), template.replace(/\{[^}]+\}/g, 'some-id'), { token, body: method === 'get' ? undefined : '{}' });
          answers.push([`${method} ${template}`, got.status, got.problems]);
        }
      }
      expect(answers.length).toBeGreaterThanOrEqual(20);
      expect(answers.filter(([, status, problems]) => status !== 401 || problems.length > 0)).toEqual([]);
    });
  });

  describe('events', () => {
    const released = aTaskEvent('task.completed', { title: 'Release 1' });

    it('POST /admin/events: 202 for a new event, 200 for a known id', async () => {
      expectAnswer(await answer('POST', '/admin/events', { body: json(released) }), 202);
      expectAnswer(await answer('POST', '/admin/events', { body: json(released) }), 200);
      await settledEvent(engine, released.id!);
    });

    it('POST /admin/events: 400 for a body that is not JSON or not an event, 413 for one too large', async () => {
      expectAnswer(await answer('POST', '/admin/events', { body: '[1,' }), 400, 'invalid_json');
      expectAnswer(await answer('POST', '/admin/events', { body: json({ id: 'evt_no_type', data: {} }) }), 400, 'invalid_event');
      expectAnswer(await answer('POST', '/admin/events', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('GET /admin/events: 200, and 400 with details for a bad filter, limit or cursor', async () => {
      expectAnswer(await answer('GET', '/admin/events'), 200);
      expectAnswer(await answer('GET', '/admin/events?type=task.completed&status=processed&limit=1'), 200);
      for (const query of ['status=done', 'limit=0', 'cursor=not-a-cursor']) {
        const got = await answer('GET', `/admin/events?${query}`);
        expectAnswer(got, 400, 'validation_failed');
        expect((got.body as { error: { details: unknown[] } }).error.details).toHaveLength(1);
      }
    });

    it('GET /admin/events/{id}: 200 with the explanation, 404 for an unknown id', async () => {
      expectAnswer(await answer('GET', `/admin/events/${encodeURIComponent(released.id!)}`), 200);
      expectAnswer(await answer('GET', '/admin/events/evt_unknown'), 404, 'not_found');
    });

    it('POST /admin/events/{id}/replay: 202, 404 for an unknown id', async () => {
      expectAnswer(await answer('POST', `/admin/events/${encodeURIComponent(released.id!)}/replay`), 202);
      expectAnswer(await answer('POST', '/admin/events/evt_unknown/replay'), 404, 'not_found');
    });
  });

  describe('executions and action runs', () => {
    let failedRun: string;
    let succeededRun: string;
    let execution: string;

    beforeAll(async () => {
      const released = aTaskEvent('task.completed', { title: 'Release 2' });
      const blocked = aTaskEvent('task.blocked');
      for (const event of [released, blocked]) expect((await engine.admin('/admin/events', { method: 'POST', body: json(event) })).status).toBe(202);
      const done = await settledEvent(engine, released.id!);
      const stuck = await settledEvent(engine, blocked.id!);
      execution = done.executions[0].id;
      succeededRun = done.executions[0].actions[0].id;
      failedRun = stuck.executions[0].actions[0].id;
      expect([done.executions[0].actions[0].status, stuck.executions[0].actions[0].status]).toEqual(['succeeded', 'failed']);
    });

    it('GET /admin/executions: 200, 400 with details for a bad status', async () => {
      expectAnswer(await answer('GET', '/admin/executions?rule=release-review'), 200);
      expectAnswer(await answer('GET', '/admin/executions?status=done'), 400, 'validation_failed');
    });

    it('GET /admin/executions/{id}: 200, 404', async () => {
      expectAnswer(await answer('GET', `/admin/executions/${execution}`), 200);
      expectAnswer(await answer('GET', '/admin/executions/exe_unknown'), 404, 'not_found');
    });

    it('GET /admin/actions: 200, 400 with details for a bad status', async () => {
      expectAnswer(await answer('GET', '/admin/actions?status=failed'), 200);
      expectAnswer(await answer('GET', '/admin/actions'), 200);
      expectAnswer(await answer('GET', '/admin/actions?status=dead'), 400, 'validation_failed');
    });

    it('POST /admin/actions/{id}/retry: 200 for a failed run, 409 for one that has not failed, 404', async () => {
      expectAnswer(await answer('POST', `/admin/actions/${failedRun}/retry`), 200);
      expectAnswer(await answer('POST', `/admin/actions/${succeededRun}/retry`), 409, 'not_retryable');
      expectAnswer(await answer('POST', '/admin/actions/run_unknown/retry'), 404, 'not_found');
    });
  });

  describe('waiting executions', () => {
    const waitAnHour = {
      id: 'wait-an-hour',
      on: 'task.waiting',
      actions: [{ type: 'delay', params: { duration: 'PT1H' } }, { type: 'task.update', params: { id: '{{ event.data.task.id }}', title: 'Later' } }],
    };
    const waitingOne = async (): Promise<string> => {
      const event = aTaskEvent('task.waiting');
      expect((await engine.admin('/admin/events', { method: 'POST', body: json(event) })).status).toBe(202);
      const detail = await waitUntil(async () => {
        const got = (await jsonOf(engine.admin(`/admin/events/${event.id!}`))) as { executions?: Array<{ id: string; status: string }> };
        return got.executions?.[0]?.status === 'waiting' ? got : undefined;
      });
      return detail.executions![0]!.id;
    };

    beforeAll(async () => {
      expect((await engine.admin('/admin/rules', { method: 'POST', body: json(waitAnHour) })).status).toBe(201);
    });

    it('POST /admin/executions/{id}/cancel: 200 for a waiting execution, 409 for one that is not, 404', async () => {
      const waiting = await waitingOne();
      expectAnswer(await answer('POST', `/admin/executions/${waiting}/cancel`), 200);
      expectAnswer(await answer('POST', `/admin/executions/${waiting}/cancel`), 409, 'not_waiting');
      expectAnswer(await answer('POST', '/admin/executions/exe_unknown/cancel'), 404, 'not_found');
    });

    it('POST /admin/executions/{id}/resume: 200 for a waiting execution, 409 for one that is not, 404', async () => {
      const waiting = await waitingOne();
      expectAnswer(await answer('POST', `/admin/executions/${waiting}/resume`), 200);
      await waitUntil(async () => (await jsonOf(engine.admin(`/admin/executions/${waiting}`)) as { status: string }).status !== 'running');
      expectAnswer(await answer('POST', `/admin/executions/${waiting}/resume`), 409, 'not_waiting');
      expectAnswer(await answer('POST', '/admin/executions/exe_unknown/resume'), 404, 'not_found');
    });
  });

  describe('rules', () => {
    const invalidRule = { id: 'Not A Valid Id', on: 'task.created', actions: [] };
    const event = aTaskEvent('task.completed', { title: 'Release 3' });

    it('GET /admin/rules: 200, 400 for a bad cursor', async () => {
      expectAnswer(await answer('GET', '/admin/rules?limit=1'), 200);
      expectAnswer(await answer('GET', '/admin/rules?cursor=%%%'), 400, 'validation_failed');
    });

    it('POST /admin/rules: 201, 400 with details, 409 for a taken id, 413', async () => {
      expectAnswer(await answer('POST', '/admin/rules', { body: json(apiRule) }), 201);
      const bad = await answer('POST', '/admin/rules', { body: json(invalidRule) });
      expectAnswer(bad, 400, 'validation_failed');
      expect((bad.body as { error: { details: unknown[] } }).error.details.length).toBeGreaterThan(0);
      expectAnswer(await answer('POST', '/admin/rules', { body: 'not json' }), 400, 'invalid_json');
      expectAnswer(await answer('POST', '/admin/rules', { body: json(apiRule) }), 409, 'rule_id_taken');
      expectAnswer(await answer('POST', '/admin/rules', { body: json({ ...apiRule, id: 'release-review' }) }), 409, 'rule_id_taken');
      expectAnswer(await answer('POST', '/admin/rules', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('GET /admin/rules/{id}: 200 for a file rule and an API rule, 404', async () => {
      expectAnswer(await answer('GET', '/admin/rules/release-review'), 200);
      expectAnswer(await answer('GET', '/admin/rules/api-rule'), 200);
      expectAnswer(await answer('GET', '/admin/rules/no-such-rule'), 404, 'not_found');
    });

    it('PUT /admin/rules/{id}: 200, 400 with details, 404, 409 for a file rule, 413', async () => {
      expectAnswer(await answer('PUT', '/admin/rules/api-rule', { body: json({ ...apiRule, name: 'Renamed' }) }), 200);
      expectAnswer(await answer('PUT', '/admin/rules/api-rule', { body: json({ ...apiRule, actions: [] }) }), 400, 'validation_failed');
      expectAnswer(await answer('PUT', '/admin/rules/no-such-rule', { body: json(apiRule) }), 404, 'not_found');
      expectAnswer(await answer('PUT', '/admin/rules/release-review', { body: json(reviewRelease) }), 409, 'rule_defined_in_file');
      expectAnswer(await answer('PUT', '/admin/rules/api-rule', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it.each(['enable', 'disable'])('POST /admin/rules/{id}/%s: 200, 404', async (verb) => {
      expectAnswer(await answer('POST', `/admin/rules/release-review/${verb}`), 200);
      expectAnswer(await answer('POST', `/admin/rules/no-such-rule/${verb}`), 404, 'not_found');
    });

    it('POST /admin/rules/validate: 200 for a valid and an invalid rule, 400 for a body that is not JSON, 413', async () => {
      expectAnswer(await answer('POST', '/admin/rules/validate', { body: json(apiRule) }), 200);
      expectAnswer(await answer('POST', '/admin/rules/validate', { body: json(invalidRule) }), 200);
      expectAnswer(await answer('POST', '/admin/rules/validate', { body: '{' }), 400, 'invalid_json');
      expectAnswer(await answer('POST', '/admin/rules/validate', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('POST /admin/rules/{id}/test: 200, 400 with details for a missing event, 404, 413', async () => {
      expectAnswer(await answer('POST', '/admin/rules/release-review/test', { body: json({ event }) }), 200);
      expectAnswer(await answer('POST', '/admin/rules/release-review/test', { body: json({}) }), 400, 'validation_failed');
      expectAnswer(await answer('POST', '/admin/rules/no-such-rule/test', { body: json({ event }) }), 404, 'not_found');
      expectAnswer(await answer('POST', '/admin/rules/release-review/test', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('POST /admin/rules/test: 200, 400 with details for an invalid rule, 413', async () => {
      expectAnswer(await answer('POST', '/admin/rules/test', { body: json({ rule: reviewRelease, event }) }), 200);
      expectAnswer(await answer('POST', '/admin/rules/test', { body: json({ rule: invalidRule, event }) }), 400, 'validation_failed');
      expectAnswer(await answer('POST', '/admin/rules/test', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('POST /admin/rules/backtest: 200 with and without rules, 400 with details for a bad filter, 413', async () => {
      expectAnswer(await answer('POST', '/admin/rules/backtest', {}), 200);
      expectAnswer(await answer('POST', '/admin/rules/backtest', { body: json({ rules: [reviewRelease], type: 'task.completed' }) }), 200);
      expectAnswer(await answer('POST', '/admin/rules/backtest', { body: json({ since: 'yesterday' }) }), 400, 'validation_failed');
      expectAnswer(await answer('POST', '/admin/rules/backtest', { body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('POST /admin/rules/reload: 200', async () => {
      expectAnswer(await answer('POST', '/admin/rules/reload'), 200);
    });

    it('DELETE /admin/rules/{id}: 204, 404, 409 for a file rule', async () => {
      expectAnswer(await answer('DELETE', '/admin/rules/api-rule'), 204);
      expectAnswer(await answer('DELETE', '/admin/rules/api-rule'), 404, 'not_found');
      expectAnswer(await answer('DELETE', '/admin/rules/release-review'), 409, 'rule_defined_in_file');
    });
  });

  describe('the console', () => {
    const session = async (token: string) => fetch(`${engine.url}/console/session`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: json({ token }) });

    it('POST /console/session: 200, 400 for a body that is not JSON, 401 for a wrong token, 413', async () => {
      expectAnswer(await answer('POST', '/console/session', { token: false, body: json({ token: engine.config.adminToken }) }), 200);
      expectAnswer(await answer('POST', '/console/session', { token: false, body: '{' }), 400, 'invalid_json');
      expectAnswer(await answer('POST', '/console/session', { token: false, body: json({ token: 'not-the-admin-token-at-all' }) }), 401, 'unauthorized');
      expectAnswer(await answer('POST', '/console/session', { token: false, body: OVERSIZED }), 413, 'payload_too_large');
    });

    it('GET /console/session: 200 signed in, 401 not; DELETE /console/session: 204', async () => {
      const cookie = (await session(engine.config.adminToken)).headers.get('set-cookie')!.split(';')[0];
      expectAnswer(await answer('GET', '/console/session', { token: false, headers: { Cookie: cookie } }), 200);
      expectAnswer(await answer('DELETE', '/console/session', { token: false, headers: { Cookie: cookie } }), 204);
      expectAnswer(await answer('GET', '/console/session', { token: false, headers: { Cookie: cookie } }), 401, 'unauthorized');
    });

    it('GET /admin/overview and /admin/rule-problems: 200', async () => {
      expectAnswer(await answer('GET', '/admin/overview'), 200);
      expectAnswer(await answer('GET', '/admin/rule-problems'), 200);
    });

    it('GET /admin/events/{id}/context: 200, 404', async () => {
      const event = aTaskEvent('task.completed', { title: 'Release 9' });
      expect((await engine.admin('/admin/events', { method: 'POST', body: json(event) })).status).toBe(202);
      await settledEvent(engine, event.id!);
      expectAnswer(await answer('GET', `/admin/events/${encodeURIComponent(event.id!)}/context`), 200);
      expectAnswer(await answer('GET', '/admin/events/evt_unknown/context'), 404, 'not_found');
    });

    it('GET /admin/live/events: 200 with a stream, 400 for a bad filter', async () => {
      const aborted = new AbortController();
      const res = await fetch(`${engine.url}/admin/live/events`, { headers: { Authorization: `Bearer ${engine.config.adminToken}` }, signal: aborted.signal });
      // The stream may open with a bare newline in a chunk of its own: read until the first event has come.
      const reader = res.body!.getReader();
      let text = '';
      for (let chunk = 0; chunk < 10 && !text.includes('\n\n'); chunk++) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      aborted.abort();
      seen.add(`GET /admin/live/events ${res.status}`);
      expect([res.status, res.headers.get('content-type'), text]).toEqual([200, expect.stringMatching(/^text\/event-stream/), expect.stringMatching(/^\s*event: ready\n/)]);
      expect(answerProblems(document, 'GET', '/admin/live/events', res.status, text)).toEqual([]);
      expectAnswer(await answer('GET', '/admin/live/events?status=done'), 400, 'validation_failed');
    });
  });

  it('GET /admin/replicas: 200', async () => {
    expectAnswer(await answer('GET', '/admin/replicas'), 200);
  });

  it('has seen every answer the document declares', () => {
    const declared = Object.entries(document.paths).flatMap(([template, operations]) =>
      Object.entries(operations).flatMap(([method, operation]) =>
        Object.keys(operation.responses ?? {}).map((status) => `${method.toUpperCase()} ${template} ${status}`),
      ),
    );
    expect(declared.filter((answer) => !seen.has(answer) && !NOT_DRIVEN.has(answer) && !refusedWrite(answer))).toEqual([]);
  });
});
