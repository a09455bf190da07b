/**
 * Rules over time, end to end: reloading RULES_DIR, what survives a restart on
 * the same database, and pagination of every admin list.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allPages, errorOf, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { rulesDir, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { ids, taskRule, tasksTitled } from './support/rules-harness.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('admin rules lifecycle');

describe.each(kinds)('the admin rules API on $name', (kind) => {
  describe('reloading RULES_DIR', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules: [] } });
    let engine: RunningEngine;
    let dir: string;

    beforeAll(async () => {
      ({ engine } = rig);
      dir = engine.config.rulesDir;
      writeFileSync(join(dir, 'changed.json'), JSON.stringify(taskRule('reload-changed', 'probe.reload', 'Old')));
      writeFileSync(join(dir, 'removed.json'), JSON.stringify(taskRule('reload-removed', 'probe.reload', 'Removed')));
      writeFileSync(join(dir, 'same.json'), JSON.stringify(taskRule('reload-same', 'probe.reload', 'Same')));
      await engine.admin('/admin/rules/reload', { method: 'POST' });
      await waitUntil(async () => (await body(engine.admin('/admin/rules'))).items.length === 3, { timeoutMs: 5000, what: 'three rules' });
      // Let the watcher's own reload of these files pass, so the reload below sees only its own changes.
      await waitUntil(() => engine.logs.some((line) => line.includes('"rules reloaded after a file change"')), {
        timeoutMs: 5000,
        what: "the watcher's reload after the files were written (its log line)",
      });
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
    const rig = useRig(kind);

    it('keeps API rules', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'engine-rules-'));
      const first = await rig.start(dir);
      const created = await body(first.admin('/admin/rules', sendJson('POST', taskRule('api-durable', 'probe.durable', 'Durable'))));
      await first.stop();

      const second = await rig.start(dir);
      const rule = await body(second.admin('/admin/rules/api-durable'));
      expect(rule).toMatchObject({ id: 'api-durable', source: 'api', enabled: true, version: created.version });
      await deliver(second.url, aTaskEvent('probe.durable', { title: 'After restart' }));
      await waitUntil(() => tasksTitled(rig.sim, 'Durable: After restart').length === 1, { what: 'the API rule to act after a restart' });
    });

    it('keeps a file rule disabled across a reload and a restart, and enabled again after that', async () => {
      const dir = rulesDir([taskRule('file-durable', 'probe.durable-file', 'Durable file')]);
      const first = await rig.start(dir);
      expect((await first.admin('/admin/rules/file-durable/disable', { method: 'POST' })).status).toBe(200);
      expect((await first.admin('/admin/rules/reload', { method: 'POST' })).status).toBe(200);
      expect((await body(first.admin('/admin/rules/file-durable'))).enabled).toBe(false);
      await first.stop();

      const second = await rig.start(dir);
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
      expect(tasksTitled(rig.sim, 'Durable file: On')).toHaveLength(1);
      expect(tasksTitled(rig.sim, 'Durable file: Off')).toHaveLength(0);
    });

    it('keeps a file rule enabled by an operator when its file says enabled: false', async () => {
      const dir = rulesDir([taskRule('file-off', 'probe.file-off', 'File off', { enabled: false })]);
      const first = await rig.start(dir);
      expect((await body(first.admin('/admin/rules/file-off'))).enabled).toBe(false);
      await first.admin('/admin/rules/file-off/enable', { method: 'POST' });
      await first.stop();
      const second = await rig.start(dir);
      await second.admin('/admin/rules/reload', { method: 'POST' });
      expect((await body(second.admin('/admin/rules/file-off'))).enabled).toBe(true);
    });
  });

  describe('pagination', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules: [taskRule('page-file', 'page.event', 'Paged')] } });
    let engine: RunningEngine;
    const delivered: string[] = [];

    beforeAll(async () => {
      ({ engine } = rig);
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
