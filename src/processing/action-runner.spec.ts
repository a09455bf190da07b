import { Logger } from '@nestjs/common';
import { ExecutionEntity } from '../database/execution.entity.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, taskEvent, useCoreWithSimulator, type Core } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { ActionRunner } from './action-runner.js';

const kinds = await databasesUnderTest('action runner');

const review = aRule({
  id: 'review',
  actions: [{ id: 'review', type: 'task.create', params: { project_id: 'prj_1', title: 'Review: {{ event.data.task.title }}' } }],
});
const reviewThenNotify = aRule({
  id: 'review-then-notify',
  actions: [
    ...review.definition.actions,
    { type: 'workflow.trigger', params: { id: 'wf_notify', input: { task_id: '{{ actions.review.response.id }}' } } },
  ],
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${ActionRunner.name} on $name, sending to the simulator`, (kind) => {
  const rig = useCoreWithSimulator(kind);

  /** A stored event about a task titled `title`, matched by `rule`: its first action run is due. */
  async function matched(rule = review, title = 'Write docs'): Promise<string> {
    rig.core.useRules(rule);
    const eventId = await rig.core.store(taskEvent('task.completed', { title }));
    await rig.core.processNext();
    return eventId;
  }

  const execution = async (eventId: string) => (await rig.core.executions(eventId))[0];

  describe('an action the service accepts', () => {
    it('succeeds with the request and the response stored, and ends the execution', async () => {
      const eventId = await matched();
      const { claim, status } = await rig.core.performNext();
      expect(status).toBe('succeeded');

      const run = await rig.core.run(claim.id);
      expect(run).toMatchObject({ status: 'succeeded', attempts: 1, responseStatus: 201, leaseOwner: null, errorCode: null });
      expect(JSON.parse(run.request!)).toMatchObject({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Write docs' } });
      const created = JSON.parse(run.response!) as { id: string; title: string };
      expect(rig.sim.state.tasks.get(created.id)).toMatchObject({ title: 'Review: Write docs' });
      expect(await execution(eventId)).toMatchObject({ status: 'succeeded', error: null, finishedAt: rig.core.clock.now().toISOString() });
    });

    it('records the created resource as the engine’s own doing, at the depth of the event', async () => {
      await matched();
      const { claim } = await rig.core.performNext();

      const created = JSON.parse((await rig.core.run(claim.id)).response!) as { id: string };
      expect(await rig.core.db.manager.findOneByOrFail(ResourceProvenanceEntity, { resourceKey: `task:${created.id}` })).toMatchObject({
        depth: 0,
        actionRunId: claim.id,
        ruleId: 'review',
        changedAt: rig.core.clock.now().toISOString(),
      });
    });

    it('sends the run’s id as the Idempotency-Key', async () => {
      await matched();
      const { claim } = await rig.core.performNext();

      expect(rig.sim.requests.map((r) => [r.method, r.path, r.idempotencyKey])).toEqual([['POST', '/v1/tasks', claim.id]]);
      expect(rig.sim.effectsByIdempotencyKey.get(claim.id)).toBe(1);
    });
  });

  describe('runs claimed together', () => {
    it('read their executions with one statement, each with its rule and event', async () => {
      await matched(review, 'First');
      await matched(reviewThenNotify, 'Second'); // matched by both rules, which are loaded now
      const claims = await rig.core.queue.claimActionRuns(10, 30_000);
      expect(claims).toHaveLength(3);

      const executions = await rig.core.runner.executionsOf(claims);
      expect(executions.size).toBe(3);
      for (const claim of claims) {
        expect(executions.get(claim.execution_id)).toMatchObject({
          id: claim.execution_id, ruleId: claim.rule_id, eventSeq: claim.event_seq, eventType: 'task.completed', eventDepth: 0,
        });
      }
      expect([...executions.values()].map((e) => e.rule.actions.length).sort()).toEqual([1, 1, 2]);
    });

    it('read nothing for a claim of one run: it reads its own', async () => {
      await matched();
      const claims = await rig.core.queue.claimActionRuns(10, 30_000);
      expect(claims).toHaveLength(1);
      expect((await rig.core.runner.executionsOf(claims)).size).toBe(0);
    });
  });

  describe('a rule with two actions', () => {
    it('creates the second action’s run when the first succeeds, and renders it from the first one’s response', async () => {
      const eventId = await matched(reviewThenNotify);
      const first = await rig.core.performNext();
      expect(await execution(eventId)).toMatchObject({ status: 'running', finishedAt: null });
      const runs = await rig.core.runs(first.claim.execution_id);
      expect(runs.map((r) => [r.position, r.type, r.status])).toEqual([
        [0, 'task.create', 'succeeded'],
        [1, 'workflow.trigger', 'pending'],
      ]);

      const second = await rig.core.performNext();
      expect(second.claim.id).toBe(runs[1].id);
      expect(second.status).toBe('succeeded');
      const reviewTask = JSON.parse(runs[0].response!) as { id: string };
      expect(rig.sim.requests.at(-1)).toMatchObject({ method: 'POST', path: '/v1/workflows/wf_notify/trigger', body: { task_id: reviewTask.id } });
      expect(await execution(eventId)).toMatchObject({ status: 'succeeded' });
    });
  });
});

describe.each(kinds)(`${ActionRunner.name} on $name, in dry-run`, (kind) => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(kind);
  });

  afterEach(() => core.close());

  it('skips the action, storing the request it would send and a simulated response', async () => {
    core.useRules(reviewThenNotify);
    const eventId = await core.store(taskEvent('task.completed', { title: 'Write docs' }));
    await core.processNext();
    const first = await core.performNext();
    expect(first.status).toBe('skipped');

    const run = await core.run(first.claim.id);
    expect(JSON.parse(run.request!)).toMatchObject({ method: 'POST', path: '/tasks', body: { title: 'Review: Write docs' } });
    expect(JSON.parse(run.response!)).toEqual({ id: `dry-run-${run.id.slice(0, 8)}`, project_id: 'prj_1', title: 'Review: Write docs', dry_run: true });

    const second = await core.performNext();
    expect(second.status).toBe('skipped');
    expect(JSON.parse((await core.run(second.claim.id)).request!)).toMatchObject({ body: { task_id: `dry-run-${run.id.slice(0, 8)}` } });
    expect(await core.db.manager.findOneByOrFail(ExecutionEntity, { eventId })).toMatchObject({ status: 'succeeded' });
  });
});
