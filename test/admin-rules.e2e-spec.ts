/**
 * The admin API for rules, end to end over HTTP: listing, creating, replacing
 * and deleting API rules, enabling and disabling any rule, validating, dry runs
 * (test, backtest), reload, what survives a restart, authentication and
 * pagination of every list, on every database under test.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { allPages, errorOf, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { rulesDir, startEngine, TEST_ADMIN_TOKEN, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver, waitFor } from './support/events.js';

/** A rule that creates a task titled `<prefix>: <event's task title>` on `on`. */
function taskRule(id: string, on: string | string[], prefix: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    name: `Rule ${id}`,
    on,
    actions: [{ id: 'create', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: `${prefix}: {{ event.data.task.title }}` } }],
    ...extra,
  };
}

/** Release titles in prj_1 get a review task, then the notify workflow with that task's id. */
const releaseReview = {
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

const kinds = await databasesUnderTest('admin rules');

describe.each(kinds)('the admin rules API on $name', (kind) => {
  const cleanups: Array<() => Promise<unknown>> = [];

  async function freshEngine(rules: unknown[], env: Record<string, string> = {}) {
    const db = await kind.create();
    const sim = await startSimulator({ seed: true });
    const dir = rulesDir(rules);
    const engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: dir, ...env });
    cleanups.push(() => engine.stop(), () => sim.close(), () => db.drop());
    return { db, sim, dir, engine };
  }

  /** Stops what the current block started (engines first), so engines do not pile up across blocks. */
  async function cleanUp() {
    for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => undefined);
  }
  afterAll(cleanUp);

  const writes = (sim: Simulator) => sim.requests.filter((r) => r.method !== 'GET');
  const tasksTitled = (sim: Simulator, prefix: string) =>
    sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && String((r.body as { title?: string }).title).startsWith(prefix));
  const ids = (items: Array<{ id: string }>) => items.map((item) => item.id);

  describe('authentication', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;

    beforeAll(async () => {
      ({ engine } = await freshEngine([taskRule('file-probe', 'probe.file', 'File probe')]));
    });

    const event = aTaskEvent('probe.file', { title: 'Refused' });
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/admin/rules'],
      ['POST', '/admin/rules', taskRule('auth-created', 'probe.auth', 'Auth')],
      ['GET', '/admin/rules/file-probe'],
      ['PUT', '/admin/rules/file-probe', taskRule('file-probe', 'probe.file', 'Changed')],
      ['DELETE', '/admin/rules/file-probe'],
      ['POST', '/admin/rules/file-probe/enable'],
      ['POST', '/admin/rules/file-probe/disable'],
      ['POST', '/admin/rules/validate', taskRule('auth-valid', 'probe.auth', 'Auth')],
      ['POST', '/admin/rules/file-probe/test', { event }],
      ['POST', '/admin/rules/test', { rule: taskRule('auth-unsaved', 'probe.file', 'Auth'), event }],
      ['POST', '/admin/rules/backtest', {}],
      ['POST', '/admin/rules/reload'],
      ['GET', '/admin/events'],
      ['GET', `/admin/events/${event.id}`],
      ['POST', '/admin/events', event],
      ['POST', `/admin/events/${event.id}/replay`],
      ['GET', '/admin/executions'],
      ['GET', '/admin/executions/00000000-0000-0000-0000-000000000000'],
      ['GET', '/admin/actions?status=failed'],
      ['POST', '/admin/actions/00000000-0000-0000-0000-000000000000/retry'],
    ];
    const credentials: Array<[string, Record<string, string>]> = [
      ['no Authorization header', {}],
      ['a wrong token', { Authorization: 'Bearer not_the_admin_token_0123456789' }],
      ['the token with one character more', { Authorization: `Bearer ${TEST_ADMIN_TOKEN}x` }],
      ['the token under another scheme', { Authorization: `Basic ${TEST_ADMIN_TOKEN}` }],
    ];
    const table = routes.flatMap(([method, path, payload]) => credentials.map(([how, headers]) => ({ method, path, payload, how, headers })));

    it.each(table)('answers 401 unauthorized to $method $path with $how', async ({ method, path, payload, headers }) => {
      const res = await fetch(`${engine.url}${path}`, {
        method,
        headers: { 'Content-Type': 'application/json', ...headers },
        ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
      });
      expect(res.status).toBe(401);
      expect((await body(res)).error).toMatchObject({ code: 'unauthorized', message: expect.any(String) });
    });

    it('changed nothing for the refused requests', async () => {
      const rules = await body(engine.admin('/admin/rules'));
      expect(ids(rules.items)).toEqual(['file-probe']);
      expect(rules.items[0]).toMatchObject({ enabled: true, source: 'file' });
      expect((await body(engine.admin('/admin/events'))).items).toEqual([]);
    });

    it('accepts the admin token', async () => {
      expect((await engine.admin('/admin/rules')).status).toBe(200);
    });
  });

  describe('listing and reading rules', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    let sim: Simulator;
    const fileRule = taskRule('file-probe', 'probe.file', 'File probe', { priority: 5 });

    beforeAll(async () => {
      ({ engine, sim } = await freshEngine([fileRule]));
    });

    it('lists a file rule with its source, path, triggers, version and zero counts', async () => {
      const list = await body(engine.admin('/admin/rules'));
      expect(list.next_cursor).toBeNull();
      expect(list.items).toEqual([
        expect.objectContaining({
          id: 'file-probe',
          name: 'Rule file-probe',
          source: 'file',
          path: 'rule-0.json',
          enabled: true,
          priority: 5,
          triggers: ['probe.file'],
          version: expect.stringMatching(/^[0-9a-f]{16}$/),
          counts: { matched: 0, succeeded: 0, failed: 0 },
          last_matched_at: null,
        }),
      ]);
    });

    it('lists an API rule as source api, without a path', async () => {
      const created = await engine.admin('/admin/rules', sendJson('POST', taskRule('listed-api', ['probe.listed', 'probe.other'], 'Listed')));
      expect(created.status).toBe(201);
      const list = await body(engine.admin('/admin/rules'));
      const item = list.items.find((r: { id: string }) => r.id === 'listed-api');
      expect(item).toMatchObject({ source: 'api', enabled: true, triggers: ['probe.listed', 'probe.other'], counts: { matched: 0, succeeded: 0, failed: 0 } });
      expect(item).not.toHaveProperty('path');
    });

    it('counts matches and records when the rule last matched', async () => {
      const before = Date.now();
      const event = aTaskEvent('probe.file', { title: 'Counted' });
      expect((await deliver(engine.url, event)).status).toBe(202);
      await settledEvent(engine, event.id!);
      const list = await body(engine.admin('/admin/rules'));
      const item = list.items.find((r: { id: string }) => r.id === 'file-probe');
      expect(item.counts).toEqual({ matched: 1, succeeded: 1, failed: 0 });
      expect(Date.parse(item.last_matched_at)).toBeGreaterThanOrEqual(before - 1000);
      expect(tasksTitled(sim, 'File probe: Counted')).toHaveLength(1);
    });

    it('shows one rule with its definition', async () => {
      const res = await engine.admin('/admin/rules/file-probe');
      expect(res.status).toBe(200);
      const rule = await body(res);
      expect(rule).toMatchObject({ id: 'file-probe', source: 'file', path: 'rule-0.json', definition: fileRule });
      expect(rule).not.toHaveProperty('file_problems');
      const listed = (await body(engine.admin('/admin/rules'))).items.find((r: { id: string }) => r.id === 'file-probe');
      expect(rule.version).toBe(listed.version);
    });

    it('answers 404 not_found for an unknown rule', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/rules/no-such-rule'));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
    });
  });

  describe('creating, replacing and deleting API rules', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = await freshEngine([taskRule('file-owned', 'probe.file-owned', 'File owned')]));
    });

    it('creates a rule (201) that the engine runs at once', async () => {
      const rule = taskRule('api-created', 'probe.created', 'Created');
      const res = await engine.admin('/admin/rules', sendJson('POST', rule));
      expect(res.status).toBe(201);
      expect(await body(res)).toMatchObject({ id: 'api-created', source: 'api', enabled: true, triggers: ['probe.created'], definition: rule, version: expect.stringMatching(/^[0-9a-f]{16}$/) });
      expect((await engine.admin('/admin/rules/api-created')).status).toBe(200);
      const event = aTaskEvent('probe.created', { title: 'New' });
      await deliver(engine.url, event);
      await waitFor(() => tasksTitled(sim, 'Created: New').length === 1, 10_000, 'the API rule to act');
    });

    it('refuses an action type with a typo, naming $.actions[0].type', async () => {
      const rule = { ...taskRule('typo-rule', 'probe.typo', 'Typo'), actions: [{ type: 'task.craete', params: { project_id: 'prj_1' } }] };
      const { status, error } = await errorOf(engine.admin('/admin/rules', sendJson('POST', rule)));
      expect(status).toBe(400);
      expect(error.code).toBe('validation_failed');
      expect(error.details).toEqual(expect.arrayContaining([{ path: '$.actions[0].type', message: expect.stringContaining('task.create') }]));
      expect((await engine.admin('/admin/rules/typo-rule')).status).toBe(404);
    });

    it('refuses a rule without an id, naming the id', async () => {
      const { id: _omitted, ...rule } = taskRule('unused', 'probe.noid', 'No id');
      const { status, error } = await errorOf(engine.admin('/admin/rules', sendJson('POST', rule)));
      expect(status).toBe(400);
      expect(error.code).toBe('validation_failed');
      const namesId = (d: { path: string; message: string }) => d.path === '$.id' || (d.path === '$' && /\bid\b/.test(d.message));
      expect(error.details?.some(namesId)).toBe(true);
    });

    it('refuses a body that is not JSON with 400 invalid_json', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/rules', sendJson('POST', '{"id": "broken",')));
      expect(status).toBe(400);
      expect(error.code).toBe('invalid_json');
    });

    it("answers 409 rule_id_taken for a file rule's id", async () => {
      const { status, error } = await errorOf(engine.admin('/admin/rules', sendJson('POST', taskRule('file-owned', 'probe.other', 'Other'))));
      expect(status).toBe(409);
      expect(error.code).toBe('rule_id_taken');
      expect(await body(engine.admin('/admin/rules/file-owned'))).toMatchObject({ source: 'file', triggers: ['probe.file-owned'] });
    });

    it("answers 409 rule_id_taken for an API rule's id, keeping the first rule", async () => {
      const first = await body(engine.admin('/admin/rules', sendJson('POST', taskRule('api-taken', 'probe.taken', 'First'))));
      const { status, error } = await errorOf(engine.admin('/admin/rules', sendJson('POST', taskRule('api-taken', 'probe.taken', 'Second'))));
      expect(status).toBe(409);
      expect(error.code).toBe('rule_id_taken');
      expect((await body(engine.admin('/admin/rules/api-taken'))).version).toBe(first.version);
    });

    it('replaces an API rule: a new version, the id kept from the path, the new actions run', async () => {
      const created = await body(engine.admin('/admin/rules', sendJson('POST', taskRule('api-replaced', 'probe.replaced', 'Before'))));
      const { id: _id, ...withoutId } = taskRule('api-replaced', 'probe.replaced', 'After');
      const res = await engine.admin('/admin/rules/api-replaced', sendJson('PUT', withoutId));
      expect(res.status).toBe(200);
      const replaced = await body(res);
      expect(replaced).toMatchObject({ id: 'api-replaced', source: 'api', definition: { id: 'api-replaced', ...withoutId } });
      expect(replaced.version).not.toBe(created.version);
      await deliver(engine.url, aTaskEvent('probe.replaced', { title: 'Swapped' }));
      await waitFor(() => tasksTitled(sim, 'After: Swapped').length === 1, 10_000, 'the replaced rule to act');
      expect(tasksTitled(sim, 'Before: Swapped')).toHaveLength(0);
    });

    it('refuses a replacement that changes the id or is invalid, keeping the rule', async () => {
      const created = await body(engine.admin('/admin/rules', sendJson('POST', taskRule('api-kept', 'probe.kept', 'Kept'))));
      const renamed = await errorOf(engine.admin('/admin/rules/api-kept', sendJson('PUT', taskRule('api-renamed', 'probe.kept', 'Kept'))));
      expect(renamed.status).toBe(400);
      expect(renamed.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.id' })]));
      const invalid = await errorOf(engine.admin('/admin/rules/api-kept', sendJson('PUT', { ...taskRule('api-kept', 'probe.kept', 'Kept'), priority: 0 })));
      expect(invalid.status).toBe(400);
      expect(invalid.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.priority' })]));
      expect((await body(engine.admin('/admin/rules/api-kept'))).version).toBe(created.version);
      expect((await engine.admin('/admin/rules/api-renamed')).status).toBe(404);
    });

    it('answers 409 rule_defined_in_file to PUT and DELETE of a file rule, and keeps it', async () => {
      const before = await body(engine.admin('/admin/rules/file-owned'));
      const put = await errorOf(engine.admin('/admin/rules/file-owned', sendJson('PUT', taskRule('file-owned', 'probe.file-owned', 'Hijacked'))));
      expect(put.status).toBe(409);
      expect(put.error.code).toBe('rule_defined_in_file');
      const del = await errorOf(engine.admin('/admin/rules/file-owned', { method: 'DELETE' }));
      expect(del.status).toBe(409);
      expect(del.error.code).toBe('rule_defined_in_file');
      expect(await body(engine.admin('/admin/rules/file-owned'))).toMatchObject({ source: 'file', version: before.version });
    });

    it('deletes an API rule (204): gone from the list, no longer run, 404 afterwards', async () => {
      await engine.admin('/admin/rules', sendJson('POST', taskRule('api-deleted', 'probe.deleted', 'Deleted')));
      const res = await engine.admin('/admin/rules/api-deleted', { method: 'DELETE' });
      expect(res.status).toBe(204);
      expect(ids((await body(engine.admin('/admin/rules'))).items)).not.toContain('api-deleted');
      expect((await engine.admin('/admin/rules/api-deleted')).status).toBe(404);
      const event = aTaskEvent('probe.deleted');
      await deliver(engine.url, event);
      expect((await settledEvent(engine, event.id!)).status).toBe('ignored');
      expect(tasksTitled(sim, 'Deleted:')).toHaveLength(0);
      const again = await errorOf(engine.admin('/admin/rules/api-deleted', { method: 'DELETE' }));
      expect(again).toMatchObject({ status: 404, error: { code: 'not_found' } });
    });

    it('forgets the enable/disable override of a deleted API rule, also after a reload', async () => {
      const rule = taskRule('api-recreated', 'probe.recreated', 'Recreated');
      await engine.admin('/admin/rules', sendJson('POST', rule));
      expect(await body(engine.admin('/admin/rules/api-recreated/disable', { method: 'POST' }))).toMatchObject({ enabled: false });
      expect((await engine.admin('/admin/rules/api-recreated', { method: 'DELETE' })).status).toBe(204);
      expect(await body(engine.admin('/admin/rules', sendJson('POST', rule)))).toMatchObject({ id: 'api-recreated', enabled: true });
      expect((await engine.admin('/admin/rules/reload', { method: 'POST' })).status).toBe(200);
      expect((await body(engine.admin('/admin/rules/api-recreated'))).enabled).toBe(true);
    });

    it('answers 404 to PUT and DELETE of an unknown rule', async () => {
      const put = await errorOf(engine.admin('/admin/rules/never-was', sendJson('PUT', taskRule('never-was', 'probe.never', 'Never'))));
      expect(put).toMatchObject({ status: 404, error: { code: 'not_found' } });
      expect((await engine.admin('/admin/rules/never-was')).status).toBe(404);
      const del = await errorOf(engine.admin('/admin/rules/never-was', { method: 'DELETE' }));
      expect(del).toMatchObject({ status: 404, error: { code: 'not_found' } });
    });
  });

  describe('validating a rule', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;

    beforeAll(async () => {
      ({ engine } = await freshEngine([]));
    });

    it('answers valid for a good rule, and stores nothing', async () => {
      const res = await engine.admin('/admin/rules/validate', sendJson('POST', releaseReview));
      expect(res.status).toBe(200);
      expect(await body(res)).toEqual({ valid: true, errors: [] });
      expect((await engine.admin('/admin/rules/release-review')).status).toBe(404);
    });

    it('answers 200 valid:false with each problem at its path', async () => {
      const bad = {
        ...releaseReview,
        conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '([unclosed' }] },
        actions: [{ type: 'task.craete', params: { project_id: 'prj_1' } }],
      };
      const res = await engine.admin('/admin/rules/validate', sendJson('POST', bad));
      expect(res.status).toBe(200);
      const answer = await body(res);
      expect(answer.valid).toBe(false);
      expect(answer.errors).toEqual(expect.arrayContaining([{ path: '$.actions[0].type', message: expect.any(String) }]));
    });

    it('reports a regular expression that does not compile', async () => {
      const bad = { ...releaseReview, conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '([unclosed' }] } };
      const answer = await body(engine.admin('/admin/rules/validate', sendJson('POST', bad)));
      expect(answer).toEqual({ valid: false, errors: [{ path: '$.conditions.all[0].value', message: expect.stringMatching(/regular expression/) }] });
    });

    it('answers 400 invalid_json to a body that is not JSON', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/rules/validate', sendJson('POST', 'not json')));
      expect(status).toBe(400);
      expect(error.code).toBe('invalid_json');
    });
  });

  describe('enabling and disabling', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = await freshEngine([taskRule('file-toggle', 'probe.toggle', 'Toggle')]));
    });

    it('does not run a disabled file rule, and runs it again once enabled', async () => {
      const disabled = await engine.admin('/admin/rules/file-toggle/disable', { method: 'POST' });
      expect(disabled.status).toBe(200);
      expect(await body(disabled)).toMatchObject({ id: 'file-toggle', enabled: false, source: 'file' });
      expect((await body(engine.admin('/admin/rules'))).items[0]).toMatchObject({ id: 'file-toggle', enabled: false });

      const ignored = aTaskEvent('probe.toggle', { title: 'While off' });
      await deliver(engine.url, ignored);
      const detail = await settledEvent(engine, ignored.id!);
      expect(detail.status).toBe('ignored');
      expect(detail.executions).toEqual([]);
      expect(writes(sim)).toHaveLength(0);

      const enabled = await engine.admin('/admin/rules/file-toggle/enable', { method: 'POST' });
      expect(enabled.status).toBe(200);
      expect(await body(enabled)).toMatchObject({ id: 'file-toggle', enabled: true });
      const acted = aTaskEvent('probe.toggle', { title: 'While on' });
      await deliver(engine.url, acted);
      expect((await settledEvent(engine, acted.id!)).status).toBe('processed');
      expect(tasksTitled(sim, 'Toggle: While on')).toHaveLength(1);
      expect(tasksTitled(sim, 'Toggle: While off')).toHaveLength(0);
    });

    it('disables and enables an API rule', async () => {
      await engine.admin('/admin/rules', sendJson('POST', taskRule('api-toggle', 'probe.api-toggle', 'Api toggle')));
      expect(await body(engine.admin('/admin/rules/api-toggle/disable', { method: 'POST' }))).toMatchObject({ enabled: false, source: 'api' });
      const event = aTaskEvent('probe.api-toggle');
      await deliver(engine.url, event);
      expect((await settledEvent(engine, event.id!)).status).toBe('ignored');
      expect(await body(engine.admin('/admin/rules/api-toggle/enable', { method: 'POST' }))).toMatchObject({ enabled: true });
      const again = aTaskEvent('probe.api-toggle');
      await deliver(engine.url, again);
      expect((await settledEvent(engine, again.id!)).status).toBe('processed');
    });

    it.each(['enable', 'disable'])('answers 404 to %s of an unknown rule', async (verb) => {
      const { status, error } = await errorOf(engine.admin(`/admin/rules/no-such-rule/${verb}`, { method: 'POST' }));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
      expect((await engine.admin('/admin/rules/no-such-rule')).status).toBe(404);
    });
  });

  describe('dry runs: test and backtest', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    let sim: Simulator;
    const released = aTaskEvent('task.completed', { title: 'Release 2.0' });
    const other = aTaskEvent('task.completed', { title: 'Write docs' });

    beforeAll(async () => {
      ({ engine, sim } = await freshEngine([releaseReview]));
    });

    async function nothingStored() {
      expect(writes(sim)).toHaveLength(0);
      expect((await body(engine.admin('/admin/events'))).items).toEqual([]);
      expect((await body(engine.admin('/admin/executions'))).items).toEqual([]);
      expect((await body(engine.admin('/admin/actions'))).items).toEqual([]);
      expect((await body(engine.admin('/admin/rules/release-review'))).counts).toEqual({ matched: 0, succeeded: 0, failed: 0 });
    }

    it("tests a loaded rule by id: each condition's outcome and the rendered requests, with no side effects", async () => {
      const res = await engine.admin('/admin/rules/release-review/test', sendJson('POST', { event: released }));
      expect(res.status).toBe(200);
      const result = await body(res);
      expect(result).toMatchObject({ rule: 'release-review', listens: true, matched: true, enabled: true, version: expect.any(String) });
      expect(result.conditions).toEqual([
        expect.objectContaining({ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1', factValue: 'prj_1', result: true }),
        expect.objectContaining({ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release', factValue: 'Release 2.0', result: true }),
      ]);
      expect(result.actions).toEqual([
        expect.objectContaining({ id: 'review', type: 'task.create', request: expect.objectContaining({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Release 2.0' } }) }),
        expect.objectContaining({ type: 'workflow.trigger', request: expect.objectContaining({ method: 'POST', path: '/workflows/wf_notify/trigger', body: { task_id: expect.any(String) } }) }),
      ]);
      await nothingStored();
    });

    it('tests a loaded rule against an event it does not match: the failing condition, no requests', async () => {
      const result = await body(engine.admin('/admin/rules/release-review/test', sendJson('POST', { event: other })));
      expect(result).toMatchObject({ rule: 'release-review', listens: true, matched: false, actions: [] });
      expect(result.conditions).toEqual(
        expect.arrayContaining([expect.objectContaining({ operator: 'matches', value: '^Release', factValue: 'Write docs', result: false })]),
      );
      await nothingStored();
    });

    it('tests an unsaved rule, and does not save it', async () => {
      const unsaved = taskRule('unsaved-rule', 'task.completed', 'Unsaved', {
        conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Write' }] },
      });
      const res = await engine.admin('/admin/rules/test', sendJson('POST', { rule: unsaved, event: other }));
      expect(res.status).toBe(200);
      const result = await body(res);
      expect(result).toMatchObject({ rule: 'unsaved-rule', listens: true, matched: true });
      expect(result.conditions).toEqual([expect.objectContaining({ operator: 'startsWith', value: 'Write', factValue: 'Write docs', result: true })]);
      expect(result.actions).toEqual([expect.objectContaining({ type: 'task.create', request: expect.objectContaining({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Unsaved: Write docs' } }) })]);
      expect((await engine.admin('/admin/rules/unsaved-rule')).status).toBe(404);
      await nothingStored();
    });

    it("shows a template that cannot render as the action's error instead of a request", async () => {
      const unsaved = taskRule('unsaved-broken', 'task.completed', 'Broken');
      unsaved.actions[0].params.title = 'Broken: {{ event.data.task.missing_field }}';
      const result = await body(engine.admin('/admin/rules/test', sendJson('POST', { rule: unsaved, event: other })));
      expect(result.matched).toBe(true);
      expect(result.actions).toEqual([expect.objectContaining({ type: 'task.create', error: expect.objectContaining({ code: 'template_error' }) })]);
      expect(result.actions[0]).not.toHaveProperty('request');
      await nothingStored();
    });

    it('says when a tested rule does not listen to the event type', async () => {
      const result = await body(engine.admin('/admin/rules/release-review/test', sendJson('POST', { event: { ...released, type: 'task.created' } })));
      expect(result.listens).toBe(false);
    });

    it('answers 400 naming the field for an invalid unsaved rule or a missing event', async () => {
      const badRule = { ...taskRule('bad-unsaved', 'task.completed', 'Bad'), actions: [{ type: 'task.craete', params: { project_id: 'prj_1' } }] };
      const invalidRule = await errorOf(engine.admin('/admin/rules/test', sendJson('POST', { rule: badRule, event: released })));
      expect(invalidRule.status).toBe(400);
      expect(invalidRule.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.rule.actions[0].type' })]));
      const noEvent = await errorOf(engine.admin('/admin/rules/release-review/test', sendJson('POST', {})));
      expect(noEvent.status).toBe(400);
      expect(noEvent.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.event' })]));
      const untyped = await errorOf(engine.admin('/admin/rules/release-review/test', sendJson('POST', { event: { data: {} } })));
      expect(untyped.status).toBe(400);
      expect(untyped.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.event' })]));
      await nothingStored();
    });

    it('answers 404 to a test of an unknown rule', async () => {
      const { status, error } = await errorOf(engine.admin('/admin/rules/no-such-rule/test', sendJson('POST', { event: released })));
      expect(status).toBe(404);
      expect(error.code).toBe('not_found');
    });

    it('backtests a changed rule against stored events, next to what happened, sending and storing nothing', async () => {
      const stored = [aTaskEvent('task.completed', { title: 'Release 1' }), aTaskEvent('task.completed', { title: 'Hotfix 1' }), aTaskEvent('task.completed', { title: 'Release 2' })];
      for (const event of stored) {
        expect((await deliver(engine.url, event)).status).toBe(202);
        await settledEvent(engine, event.id!);
      }
      const writesBefore = writes(sim).length;
      expect(writesBefore).toBe(4); // two events matched, two actions each
      const eventsBefore = await body(engine.admin('/admin/events?limit=500'));
      const executionsBefore = await body(engine.admin('/admin/executions?limit=500'));
      const runsBefore = await body(engine.admin('/admin/actions?limit=500'));

      const proposed = { ...releaseReview, conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Hotfix' }] } };
      const res = await engine.admin('/admin/rules/backtest', sendJson('POST', { rules: [proposed], type: 'task.completed' }));
      expect(res.status).toBe(200);
      const report = await body(res);
      const byEvent = new Map(report.events.map((e: { event: { id: string } }) => [e.event.id, e]));
      expect(report.events).toHaveLength(3);
      expect(byEvent.get(stored[0].id)).toMatchObject({
        event: { id: stored[0].id, type: 'task.completed', status: 'processed' },
        would_match: [],
        matched_then: [{ rule: 'release-review', status: 'succeeded', rule_version: expect.any(String) }],
        differences: { newly_matched: [], no_longer_matched: ['release-review'] },
      });
      expect(byEvent.get(stored[1].id)).toMatchObject({
        event: { status: 'ignored' },
        would_match: [{ rule: 'release-review', actions: [expect.objectContaining({ request: expect.objectContaining({ path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Hotfix 1' } }) }), expect.anything()] }],
        matched_then: [],
        differences: { newly_matched: ['release-review'], no_longer_matched: [] },
      });
      expect(byEvent.get(stored[2].id)).toMatchObject({ would_match: [], differences: { no_longer_matched: ['release-review'] } });
      expect(report.summary).toMatchObject({ events: 3, would_match: 1, matched_then: 2, differing: 3 });

      expect(writes(sim)).toHaveLength(writesBefore);
      expect(await body(engine.admin('/admin/events?limit=500'))).toEqual(eventsBefore);
      expect(await body(engine.admin('/admin/executions?limit=500'))).toEqual(executionsBefore);
      expect(await body(engine.admin('/admin/actions?limit=500'))).toEqual(runsBefore);
      expect((await body(engine.admin('/admin/rules/release-review'))).definition).toEqual(releaseReview);
    });

    it('backtests the rule files as they are when no rules are given: no differences', async () => {
      const res = await engine.admin('/admin/rules/backtest', { method: 'POST' });
      expect(res.status).toBe(200);
      const report = await body(res);
      expect(report.events.length).toBeGreaterThanOrEqual(3);
      expect(report.summary.differing).toBe(0);
      for (const entry of report.events) {
        expect(entry.would_match.map((m: { rule: string }) => m.rule)).toEqual(entry.matched_then.map((m: { rule: string }) => m.rule));
      }
      const future = await body(engine.admin('/admin/rules/backtest', sendJson('POST', { since: new Date(Date.now() + 60_000).toISOString() })));
      expect(future.events).toEqual([]);
      const otherType = await body(engine.admin('/admin/rules/backtest', sendJson('POST', { type: 'task.created' })));
      expect(otherType.events).toEqual([]);
      const newest = await body(engine.admin('/admin/rules/backtest', sendJson('POST', { limit: 1 })));
      expect(newest.events).toHaveLength(1);
    });

    it('answers 400 naming the field for a bad filter or an invalid proposed rule', async () => {
      const limit = await errorOf(engine.admin('/admin/rules/backtest', sendJson('POST', { limit: 0 })));
      expect(limit.status).toBe(400);
      expect(limit.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.limit' })]));
      const since = await errorOf(engine.admin('/admin/rules/backtest', sendJson('POST', { since: 'yesterday' })));
      expect(since.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.since' })]));
      const badRule = { ...releaseReview, actions: [{ type: 'task.craete', params: {} }] };
      const rule = await errorOf(engine.admin('/admin/rules/backtest', sendJson('POST', { rules: [badRule] })));
      expect(rule.status).toBe(400);
      expect(rule.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: '$.rules[0].actions[0].type' })]));
    });
  });

  describe('reloading RULES_DIR', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    let dir: string;

    beforeAll(async () => {
      ({ engine, dir } = await freshEngine([]));
      writeFileSync(join(dir, 'changed.json'), JSON.stringify(taskRule('reload-changed', 'probe.reload', 'Old')));
      writeFileSync(join(dir, 'removed.json'), JSON.stringify(taskRule('reload-removed', 'probe.reload', 'Removed')));
      writeFileSync(join(dir, 'same.json'), JSON.stringify(taskRule('reload-same', 'probe.reload', 'Same')));
      await engine.admin('/admin/rules/reload', { method: 'POST' });
      // Let the watcher's own reload of these files pass, so the reload below sees only its own changes.
      await waitFor(async () => (await body(engine.admin('/admin/rules'))).items.length === 3, 5000, 'three rules');
      await new Promise((resolve) => setTimeout(resolve, 800));
    });

    it('answers what was loaded, changed, removed and rejected', async () => {
      writeFileSync(join(dir, 'added.json'), JSON.stringify(taskRule('reload-added', 'probe.reload', 'Added')));
      writeFileSync(join(dir, 'changed.json'), JSON.stringify(taskRule('reload-changed', 'probe.reload', 'New')));
      rmSync(join(dir, 'removed.json'));
      writeFileSync(join(dir, 'bad.json'), JSON.stringify({ ...taskRule('reload-bad', 'probe.reload', 'Bad'), actions: [{ type: 'task.craete', params: {} }] }));
      const res = await engine.admin('/admin/rules/reload', { method: 'POST' });
      expect(res.status).toBe(200);
      const report = await body(res);
      expect(report).toMatchObject({ loaded: ['reload-added'], changed: ['reload-changed'], removed: ['reload-removed'], unchanged: ['reload-same'], kept: [] });
      expect(report.rejected).toEqual([{ file: expect.stringMatching(/bad\.json$/), path: '$.actions[0].type', message: expect.any(String) }]);

      const listed = ids((await body(engine.admin('/admin/rules'))).items);
      expect(listed).toEqual(['reload-added', 'reload-changed', 'reload-same']);
      const changed = await body(engine.admin('/admin/rules/reload-changed'));
      expect(changed.definition.actions[0].params.title).toBe('New: {{ event.data.task.title }}');
    });

    it('answers nothing new to a second reload, and still names the bad file', async () => {
      const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
      expect(report).toMatchObject({ loaded: [], changed: [], removed: [] });
      expect(report.rejected).toEqual([expect.objectContaining({ file: expect.stringMatching(/bad\.json$/), path: '$.actions[0].type' })]);
    });
  });

  describe('across restarts on the same database', () => {
    afterAll(cleanUp);
    it('keeps API rules', async () => {
      const db = await kind.create();
      const sim = await startSimulator({ seed: true });
      const dir = mkdtempSync(join(tmpdir(), 'engine-rules-'));
      const env = { DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: dir };
      cleanups.push(() => sim.close(), () => db.drop());
      const first = await startEngine(env);
      const created = await body(first.admin('/admin/rules', sendJson('POST', taskRule('api-durable', 'probe.durable', 'Durable'))));
      await first.stop();

      const second = await startEngine(env);
      cleanups.unshift(() => second.stop());
      const rule = await body(second.admin('/admin/rules/api-durable'));
      expect(rule).toMatchObject({ id: 'api-durable', source: 'api', enabled: true, version: created.version });
      await deliver(second.url, aTaskEvent('probe.durable', { title: 'After restart' }));
      await waitFor(() => tasksTitled(sim, 'Durable: After restart').length === 1, 10_000, 'the API rule to act after a restart');
    });

    it('keeps a file rule disabled across a reload and a restart, and enabled again after that', async () => {
      const db = await kind.create();
      const sim = await startSimulator({ seed: true });
      const dir = rulesDir([taskRule('file-durable', 'probe.durable-file', 'Durable file')]);
      const env = { DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: dir };
      cleanups.push(() => sim.close(), () => db.drop());
      const first = await startEngine(env);
      expect((await first.admin('/admin/rules/file-durable/disable', { method: 'POST' })).status).toBe(200);
      expect((await first.admin('/admin/rules/reload', { method: 'POST' })).status).toBe(200);
      expect((await body(first.admin('/admin/rules/file-durable'))).enabled).toBe(false);
      await first.stop();

      const second = await startEngine(env);
      cleanups.unshift(() => second.stop());
      expect((await body(second.admin('/admin/rules/file-durable'))).enabled).toBe(false);
      const ignored = aTaskEvent('probe.durable-file', { title: 'Off' });
      await deliver(second.url, ignored);
      expect((await settledEvent(second, ignored.id!)).status).toBe('ignored');

      await second.admin('/admin/rules/file-durable/enable', { method: 'POST' });
      await second.admin('/admin/rules/reload', { method: 'POST' });
      expect((await body(second.admin('/admin/rules/file-durable'))).enabled).toBe(true);
      const acted = aTaskEvent('probe.durable-file', { title: 'On' });
      await deliver(second.url, acted);
      expect((await settledEvent(second, acted.id!)).status).toBe('processed');
      expect(tasksTitled(sim, 'Durable file: On')).toHaveLength(1);
      expect(tasksTitled(sim, 'Durable file: Off')).toHaveLength(0);
    });

    it('keeps a file rule enabled by an operator when its file says enabled: false', async () => {
      const db = await kind.create();
      const sim = await startSimulator({ seed: true });
      const dir = rulesDir([taskRule('file-off', 'probe.file-off', 'File off', { enabled: false })]);
      const env = { DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: dir };
      cleanups.push(() => sim.close(), () => db.drop());
      const first = await startEngine(env);
      expect((await body(first.admin('/admin/rules/file-off'))).enabled).toBe(false);
      await first.admin('/admin/rules/file-off/enable', { method: 'POST' });
      await first.stop();
      const second = await startEngine(env);
      cleanups.unshift(() => second.stop());
      await second.admin('/admin/rules/reload', { method: 'POST' });
      expect((await body(second.admin('/admin/rules/file-off'))).enabled).toBe(true);
    });
  });

  describe('pagination', () => {
    afterAll(cleanUp);
    let engine: RunningEngine;
    const delivered: string[] = [];

    beforeAll(async () => {
      ({ engine } = await freshEngine([taskRule('page-file', 'page.event', 'Paged')]));
      for (let i = 1; i <= 7; i++) {
        const res = await engine.admin('/admin/rules', sendJson('POST', taskRule(`page-rule-${i}`, 'page.unused', `Page ${i}`)));
        expect(res.status).toBe(201);
      }
      for (let i = 0; i < 12; i++) {
        const event = aTaskEvent('page.event', { title: `Paged ${i}` });
        delivered.push(event.id!);
        expect((await deliver(engine.url, event)).status).toBe(202);
      }
      for (const id of delivered) await settledEvent(engine, id, 20_000);
    });

    function expectSamePages(paged: Array<{ id: string }>, whole: Array<{ id: string }>) {
      expect(new Set(ids(paged)).size).toBe(paged.length);
      expect(ids(paged)).toEqual(ids(whole));
    }

    it('pages rules 3 at a time without losing or repeating one', async () => {
      const whole = (await body(engine.admin('/admin/rules?limit=500'))).items;
      expect(whole).toHaveLength(8);
      const { items, pages } = await allPages(engine, '/admin/rules', 3);
      expect(pages).toBe(3);
      expectSamePages(items, whole);
      expect(ids(items)).toEqual(expect.arrayContaining(['page-file', ...Array.from({ length: 7 }, (_, i) => `page-rule-${i + 1}`)]));
    });

    it('pages rules whose ids mix ".", "-", "_" and digits without losing one', async () => {
      const mixed = ['mix_a', 'mix-a', 'mix.a', 'mix0', 'mixa', 'mix-b', 'mix_b', 'mix.b'];
      for (const id of mixed) expect((await engine.admin('/admin/rules', sendJson('POST', taskRule(id, 'page.unused', id)))).status).toBe(201);
      try {
        const whole = (await body(engine.admin('/admin/rules?limit=500'))).items;
        const { items } = await allPages(engine, '/admin/rules', 2);
        expectSamePages(items, whole);
        expect(ids(items)).toEqual(expect.arrayContaining(mixed));
      } finally {
        for (const id of mixed) await engine.admin(`/admin/rules/${id}`, { method: 'DELETE' });
      }
    });

    it('pages events 5 at a time, also with a filter', async () => {
      const whole = (await body(engine.admin('/admin/events?limit=500'))).items;
      expect(ids(whole).sort()).toEqual([...delivered].sort());
      const { items, pages } = await allPages(engine, '/admin/events', 5);
      expect(pages).toBe(3);
      expectSamePages(items, whole);
      const filtered = await allPages(engine, '/admin/events?type=page.event&status=processed', 5);
      expectSamePages(filtered.items, whole);
    });

    it('pages executions 5 at a time, also with a filter', async () => {
      const whole = (await body(engine.admin('/admin/executions?limit=500'))).items;
      expect(whole.map((x: { event_id: string }) => x.event_id).sort()).toEqual([...delivered].sort());
      const { items, pages } = await allPages(engine, '/admin/executions', 5);
      expect(pages).toBe(3);
      expectSamePages(items, whole);
      const filtered = await allPages(engine, '/admin/executions?rule=page-file&status=succeeded', 5);
      expectSamePages(filtered.items, whole);
    });

    it('pages action runs 5 at a time, also with a filter', async () => {
      const whole = (await body(engine.admin('/admin/actions?limit=500'))).items;
      expect(whole).toHaveLength(12);
      const { items, pages } = await allPages(engine, '/admin/actions', 5);
      expect(pages).toBe(3);
      expectSamePages(items, whole);
      const filtered = await allPages(engine, '/admin/actions?status=succeeded', 5);
      expectSamePages(filtered.items, whole);
    });

    it('uses 50 as the default limit and takes 1 and 500', async () => {
      const one = await body(engine.admin('/admin/events?limit=1'));
      expect(one.items).toHaveLength(1);
      expect(one.next_cursor).toEqual(expect.any(String));
      const all = await body(engine.admin('/admin/events'));
      expect(all.items).toHaveLength(12);
      expect(all.next_cursor).toBeNull();
    });

    const lists = ['/admin/rules', '/admin/events', '/admin/executions', '/admin/actions'];
    const badLimits = ['0', '501', 'abc', '-1', '2.5'];

    it.each(lists.flatMap((path) => badLimits.map((limit) => ({ path, limit }))))('answers 400 to $path?limit=$limit', async ({ path, limit }) => {
      const { status, error } = await errorOf(engine.admin(`${path}?limit=${limit}`));
      expect(status).toBe(400);
      expect(error.code).toBe('validation_failed');
      expect(error.details).toEqual([expect.objectContaining({ path: 'limit' })]);
    });

    it.each(lists)('answers 400 to %s with a cursor it did not give out', async (path) => {
      for (const cursor of ['not-a-cursor', Buffer.from('{"x":1}').toString('base64url')]) {
        const { status, error } = await errorOf(engine.admin(`${path}?cursor=${cursor}`));
        expect(status).toBe(400);
        expect(error.details).toEqual([expect.objectContaining({ path: 'cursor' })]);
      }
    });

    it("refuses one list's cursor on another list", async () => {
      const rulesCursor = (await body(engine.admin('/admin/rules?limit=1'))).next_cursor;
      const eventsCursor = (await body(engine.admin('/admin/events?limit=1'))).next_cursor;
      expect((await engine.admin(`/admin/events?cursor=${rulesCursor}`)).status).toBe(400);
      expect((await engine.admin(`/admin/executions?cursor=${eventsCursor}`)).status).toBe(400);
      expect((await engine.admin(`/admin/rules?cursor=${eventsCursor}`)).status).toBe(400);
    });
  });
});
