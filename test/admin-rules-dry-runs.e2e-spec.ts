/**
 * Dry runs through the admin API, end to end: testing a rule (saved or not)
 * against an event, and backtesting rules against stored events, with no side effects.
 */
import type { Simulator } from '../src/simulator/simulator.js';
import { errorOf, sendJson, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { releaseReview, taskRule, writes } from './support/rules-harness.js';

const kinds = await databasesUnderTest('admin rule dry runs');

describe.each(kinds)('the admin rules API on $name', (kind) => {
  describe('dry runs: test and backtest', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules: [releaseReview] } });
    let engine: RunningEngine;
    let sim: Simulator;
    const released = aTaskEvent('task.completed', { title: 'Release 2.0' });
    const other = aTaskEvent('task.completed', { title: 'Write docs' });

    beforeAll(async () => {
      ({ engine, sim } = rig);
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

    it('shows a delay as its duration, a check against the service of now and one request per forEach item, sending nothing', async () => {
      const openInProject = [...sim.state.tasks.values()].filter((task) => task.project_id === 'prj_1' && task.status !== 'completed');
      const unsaved = {
        id: 'unsaved-time-and-sets',
        on: 'task.completed',
        conditions: { all: [{ fact: 'project', params: { id: '{{ event.data.task.project_id }}' }, path: '$.status', operator: 'equal', value: 'active' }] },
        actions: [
          { type: 'delay', params: { duration: 'PT72H' } },
          { type: 'check', conditions: { all: [{ fact: 'tasks', params: { project_id: 'prj_1' }, operator: 'isNotEmpty', value: true }] } },
          {
            type: 'task.update',
            forEach: { fact: 'tasks', params: { project_id: 'prj_1' }, path: "$[?(@.status != 'completed')]" },
            params: { id: '{{ item.id }}', priority: 'high', description: '{{ index }} in {{ facts.project.name }}' },
          },
        ],
      };
      const res = await engine.admin('/admin/rules/test', sendJson('POST', { rule: unsaved, event: other }));
      expect(res.status).toBe(200);
      const result = await body(res);
      expect(result.matched).toBe(true);
      expect(result.actions[0]).toEqual({ type: 'delay', delay: { duration: 'PT72H', ms: 259_200_000 } });
      expect(result.actions[1]).toEqual({ type: 'check', check: { passed: true, conditions: [expect.objectContaining({ fact: 'tasks', result: true })] } });
      expect(openInProject.length).toBeGreaterThan(0);
      expect(result.actions[2].items).toEqual(
        openInProject.map((task, index) => ({
          index,
          request: expect.objectContaining({ method: 'PATCH', path: `/tasks/${task.id}`, body: { priority: 'high', description: `${index} in Website relaunch` } }),
        })),
      );
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

});
