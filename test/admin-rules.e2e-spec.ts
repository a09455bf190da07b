/**
 * The admin API for rules, end to end over HTTP: authentication, listing and reading,
 * creating, replacing and deleting API rules, validating, enabling and disabling.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { errorOf, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { TEST_ADMIN_TOKEN, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { ids, releaseReview, taskRule, tasksTitled, writes } from './support/rules-harness.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('admin rules');

describe.each(kinds)('the admin rules API on $name', (kind) => {
  describe('authentication', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules: [taskRule('file-probe', 'probe.file', 'File probe')] } });
    let engine: RunningEngine;

    beforeAll(async () => {
      ({ engine } = rig);
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
    const fileRule = taskRule('file-probe', 'probe.file', 'File probe', { priority: 5 });
    const rig = useRig(kind, { per: 'block', engine: { rules: [fileRule] } });
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = rig);
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
    const rig = useRig(kind, { per: 'block', engine: { rules: [taskRule('file-owned', 'probe.file-owned', 'File owned')] } });
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = rig);
    });

    it('creates a rule (201) that the engine runs at once', async () => {
      const rule = taskRule('api-created', 'probe.created', 'Created');
      const res = await engine.admin('/admin/rules', sendJson('POST', rule));
      expect(res.status).toBe(201);
      expect(await body(res)).toMatchObject({ id: 'api-created', source: 'api', enabled: true, triggers: ['probe.created'], definition: rule, version: expect.stringMatching(/^[0-9a-f]{16}$/) });
      expect((await engine.admin('/admin/rules/api-created')).status).toBe(200);
      const event = aTaskEvent('probe.created', { title: 'New' });
      await deliver(engine.url, event);
      await waitUntil(() => tasksTitled(sim, 'Created: New').length === 1, { timeoutMs: 10_000, what: 'the API rule to act' });
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
      await waitUntil(() => tasksTitled(sim, 'After: Swapped').length === 1, { timeoutMs: 10_000, what: 'the replaced rule to act' });
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
    const rig = useRig(kind, { per: 'block', engine: { rules: [] } });
    let engine: RunningEngine;

    beforeAll(async () => {
      ({ engine } = rig);
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
    const rig = useRig(kind, { per: 'block', engine: { rules: [taskRule('file-toggle', 'probe.toggle', 'Toggle')] } });
    let engine: RunningEngine;
    let sim: Simulator;

    beforeAll(async () => {
      ({ engine, sim } = rig);
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

});
