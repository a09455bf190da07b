/**
 * Hot reload, end to end: the engine watches RULES_DIR, so a rule file added,
 * broken, fixed or removed while it runs changes what it does without a
 * restart, and a broken file never takes the last good version of its rule
 * away. One story per database, step by step on one running engine.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Simulator } from '../src/simulator/simulator.js';
import { quietEngine, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

function hotRule(titlePrefix: string) {
  return {
    id: 'hot-rule',
    name: 'Hot rule',
    on: 'task.hot',
    actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: `${titlePrefix}: {{ event.data.task.title }}` } }],
  };
}

/** Files appear in the listing of a running engine within this time, or the test fails. */
const PICKED_UP_MS = 5000;

const kinds = await databasesUnderTest('hot reload');

/** The folder starts with an unrelated rule only; hot.json is written while the engine runs. */
const bystander = { id: 'bystander', on: 'task.bystander', actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Bystander' } }] };

describe.each(kinds)('hot reload of RULES_DIR on $name', (kind) => {
  const rig = useRig(kind, { per: 'block', engine: { rules: [bystander] } });
  let sim: Simulator;
  let engine: RunningEngine;
  let dir: string;
  let file: string;
  let v1Version: string;

  beforeAll(() => {
    ({ sim, engine } = rig);
    dir = engine.config.rulesDir;
    file = join(dir, 'hot.json');
  });

  const titled = (prefix: string) =>
    sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && String((r.body as { title?: string }).title).startsWith(prefix));

  async function hotRuleNow() {
    const res = await engine.admin('/admin/rules/hot-rule');
    return res.status === 200 ? body(res) : undefined;
  }

  /** Delivers a task.hot event and answers its detail once it has been handled completely. */
  async function fire(title: string) {
    const event = aTaskEvent('task.hot', { title });
    expect((await deliver(engine.url, event)).status).toBe(202);
    return settledEvent(engine, event.id!);
  }

  it('(a) picks up a new rule file without a restart and acts on it', async () => {
    writeFileSync(file, JSON.stringify(hotRule('Hot v1'), null, 2));
    const listed = await waitUntil(
      async () => (await body(engine.admin('/admin/rules'))).items.find((r: { id: string }) => r.id === 'hot-rule'),
      { timeoutMs: PICKED_UP_MS, what: 'hot-rule in GET /admin/rules' },
    );
    expect(listed).toMatchObject({ source: 'file', path: 'hot.json', enabled: true, triggers: ['task.hot'] });
    v1Version = listed.version;

    const detail = await fire('first');
    expect(detail.status).toBe('processed');
    expect(detail.executions).toEqual([expect.objectContaining({ rule: 'hot-rule', status: 'succeeded', rule_version: v1Version })]);
    expect(titled('Hot v1: first')).toHaveLength(1);
  });

  it('(b) keeps the last good version while the file is not valid JSON, and says why', async () => {
    writeFileSync(file, '{ "id": "hot-rule", "on": "task.hot", ');
    const kept = await waitUntil(async () => {
      const rule = await hotRuleNow();
      return rule?.file_problems?.length > 0 && rule;
    }, { timeoutMs: PICKED_UP_MS, what: 'file_problems on hot-rule' });
    expect(kept).toMatchObject({ version: v1Version, source: 'file', path: 'hot.json' });
    expect(kept.file_problems).toEqual([{ path: '$', message: expect.stringMatching(/invalid JSON/) }]);

    const detail = await fire('while broken');
    expect(detail.executions).toEqual([expect.objectContaining({ rule: 'hot-rule', status: 'succeeded', rule_version: v1Version })]);
    expect(titled('Hot v1: while broken')).toHaveLength(1);

    const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
    expect(report.kept).toEqual(['hot-rule']);
    expect(report.removed).not.toContain('hot-rule');
    expect(report.rejected).toEqual([{ file: expect.stringMatching(/(^|\/)hot\.json$/), path: '$', message: expect.stringMatching(/invalid JSON/) }]);
  });

  it('(b) keeps the last good version while the file holds an invalid rule, and says why', async () => {
    const invalid = { ...hotRule('Hot broken'), actions: [{ type: 'task.craete', params: { project_id: 'prj_1', title: 'Hot broken' } }] };
    writeFileSync(file, JSON.stringify(invalid, null, 2));
    const kept = await waitUntil(async () => {
      const rule = await hotRuleNow();
      return rule?.file_problems?.some((p: { path: string }) => p.path === '$.actions[0].type') && rule;
    }, { timeoutMs: PICKED_UP_MS, what: 'the invalid action type in file_problems' });
    expect(kept.version).toBe(v1Version);
    expect(kept.definition).toEqual(hotRule('Hot v1'));

    const detail = await fire('still broken');
    expect(detail.executions).toEqual([expect.objectContaining({ rule_version: v1Version, status: 'succeeded' })]);
    expect(titled('Hot v1: still broken')).toHaveLength(1);
    expect(titled('Hot broken')).toHaveLength(0);

    const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
    expect(report).toMatchObject({ kept: ['hot-rule'], loaded: [], changed: [] });
    expect(report.rejected).toEqual([{ file: expect.stringMatching(/(^|\/)hot\.json$/), path: '$.actions[0].type', message: expect.any(String) }]);
  });

  it('(c) uses the fixed file with its new title, and records the new version on executions', async () => {
    writeFileSync(file, JSON.stringify(hotRule('Hot v2'), null, 2));
    const fixed = await waitUntil(async () => {
      const rule = await hotRuleNow();
      return rule && rule.version !== v1Version && rule.file_problems === undefined && rule;
    }, { timeoutMs: PICKED_UP_MS, what: 'the fixed hot-rule' });
    expect(fixed.definition).toEqual(hotRule('Hot v2'));

    const detail = await fire('fixed');
    expect(titled('Hot v2: fixed')).toHaveLength(1);
    expect(titled('Hot v1: fixed')).toHaveLength(0);
    const executionId = detail.executions[0].id;
    const execution = await body(engine.admin(`/admin/executions/${executionId}`));
    expect(execution).toMatchObject({ rule: 'hot-rule', status: 'succeeded' });
    expect(execution.rule_version).toBe(fixed.version);
    expect(execution.rule_version).not.toBe(v1Version);
    expect(execution.actions[0].request.body).toEqual({ project_id: 'prj_1', title: 'Hot v2: fixed' });

    const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
    expect(report).toMatchObject({ kept: [], rejected: [] });
    expect(report.unchanged).toEqual(expect.arrayContaining(['bystander', 'hot-rule']));
  });

  it('(d) forgets the rule when its file is removed: gone from the list, events no longer matched', async () => {
    rmSync(file);
    await waitUntil(async () => (await engine.admin('/admin/rules/hot-rule')).status === 404, { timeoutMs: PICKED_UP_MS, what: 'hot-rule to be gone' });
    const list = await body(engine.admin('/admin/rules'));
    expect(list.items.map((r: { id: string }) => r.id)).toEqual(['bystander']);

    const created = titled('Hot').length;
    const detail = await fire('after removal');
    expect(detail).toMatchObject({ status: 'ignored', rules: [], executions: [] });
    // Once the engine has nothing left to do, nothing more can reach the service: the count is final.
    await quietEngine(engine);
    expect(titled('Hot')).toHaveLength(created);
  });

  it('tells files with the same name in different folders apart', async () => {
    const sub = join(dir, 'team');
    mkdirSync(sub, { recursive: true });
    try {
      writeFileSync(join(dir, 'same-name.json'), JSON.stringify({ ...hotRule('Top'), id: 'top-level', on: 'task.top' }));
      await waitUntil(async () => (await engine.admin('/admin/rules/top-level')).status === 200, { timeoutMs: PICKED_UP_MS, what: 'top-level to load' });
      writeFileSync(join(sub, 'same-name.json'), '{ not json');
      await waitUntil(async () => {
        const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
        return report.rejected.some((p: { file: string }) => p.file.endsWith('team/same-name.json'));
      }, { timeoutMs: PICKED_UP_MS, what: 'the broken team file to be rejected' });
      // The problem is in team/same-name.json, not in the top-level file of the same name.
      expect(await body(engine.admin('/admin/rules/top-level'))).not.toHaveProperty('file_problems');

      // Its own file removed, the rule goes, although a file of the same name elsewhere is broken.
      rmSync(join(dir, 'same-name.json'));
      const report = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
      expect(report.kept).not.toContain('top-level');
      expect((await engine.admin('/admin/rules/top-level')).status).toBe(404);
    } finally {
      rmSync(sub, { recursive: true, force: true });
      rmSync(join(dir, 'same-name.json'), { force: true });
    }
  });

  it('refuses a rule file that takes an id owned by an API rule, and keeps the API rule', async () => {
    const apiRule = { id: 'hot-api', on: 'task.hot-api', actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Hot api' } }] };
    expect((await engine.admin('/admin/rules', sendJson('POST', apiRule))).status).toBe(201);
    rmSync(join(dir, 'rule-0.json'));
    await waitUntil(async () => (await engine.admin('/admin/rules/bystander')).status === 404, { timeoutMs: PICKED_UP_MS, what: 'bystander to be gone' });
    expect((await body(engine.admin('/admin/rules'))).items.map((r: { id: string }) => r.id)).toEqual(['hot-api']);
    writeFileSync(join(dir, 'hot.json'), JSON.stringify({ ...hotRule('Hot v3'), id: 'hot-api' }));
    const report = await waitUntil(async () => {
      const answer = await body(engine.admin('/admin/rules/reload', { method: 'POST' }));
      return answer.rejected.length > 0 && answer;
    }, { timeoutMs: PICKED_UP_MS, what: 'the clash to be reported' });
    // A file cannot take over an id the admin API owns: the file is rejected, the API rule stays.
    expect(report.rejected).toEqual([expect.objectContaining({ path: '$.id', message: expect.stringMatching(/admin API/) })]);
    expect(await body(engine.admin('/admin/rules/hot-api'))).toMatchObject({ source: 'api', definition: apiRule });
  });
});

