import { Logger } from '@nestjs/common';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { taskEvent, useCoreWithSimulator } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { ActionRunner } from './action-runner.js';
import { WorkQueue } from './work-queue.js';

const kinds = await databasesUnderTest('action runner: failures and retries');

const reviewIn = (projectId: string) =>
  aRule({
    id: 'review',
    actions: [{ id: 'review', type: 'task.create', params: { project_id: projectId, title: 'Review: {{ event.data.task.title }}' } }],
  });
const stampedReview = aRule({
  id: 'stamped-review',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review at {{ now.iso }}' } }],
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${ActionRunner.name} on $name, when things go wrong`, (kind) => {
  const rig = useCoreWithSimulator(kind);

  async function matched(rule = reviewIn('prj_1')): Promise<string> {
    rig.core.useRules(rule);
    const eventId = await rig.core.store(taskEvent('task.completed'));
    await rig.core.processNext();
    return eventId;
  }

  const failNextTaskCreation = (status: number) => rig.sim.setFaults({ script: [{ status, method: 'POST', pathPrefix: '/tasks' }] });

  describe('a 500 from the service', () => {
    it('puts the run in retrying, due later by the engine’s clock, and keeps the execution running', async () => {
      const eventId = await matched();
      failNextTaskCreation(500);
      const { claim, status } = await rig.core.performNext();
      expect(status).toBe('retrying');

      const run = await rig.core.run(claim.id);
      expect(run).toMatchObject({ status: 'retrying', responseStatus: 500, errorCode: 'internal_error', leaseOwner: null });
      expect(Date.parse(run.nextAttemptAt)).toBeGreaterThan(rig.core.clock.now().getTime());
      expect(await rig.core.queue.claimActionRuns(1, rig.core.runner.leaseMs)).toEqual([]);
      expect((await rig.core.executions(eventId))[0]).toMatchObject({ status: 'running', finishedAt: null });
    });

    it('sends the request rendered at the first attempt unchanged on the retry, though `now` has moved', async () => {
      await matched(stampedReview);
      const firstNow = rig.core.clock.now().toISOString();
      failNextTaskCreation(500);
      const first = await rig.core.performNext();
      rig.core.clock.advance(10 * 60_000);
      const retry = await rig.core.performNext();

      expect([first.status, retry.status]).toEqual(['retrying', 'succeeded']);
      expect(retry.claim).toMatchObject({ id: first.claim.id, attempts: 2 });
      const sent = rig.sim.requests.map((r) => [r.body, r.idempotencyKey, r.status]);
      expect(sent).toEqual([
        [{ project_id: 'prj_1', title: `Review at ${firstNow}` }, first.claim.id, 500],
        [{ project_id: 'prj_1', title: `Review at ${firstNow}` }, first.claim.id, 201],
      ]);
    });
  });

  describe('a 400 from the service', () => {
    it('fails the run for good and the execution with the service’s error', async () => {
      const eventId = await matched(reviewIn('prj_missing'));
      const { claim, status } = await rig.core.performNext();
      expect(status).toBe('failed');

      expect(await rig.core.run(claim.id)).toMatchObject({ status: 'failed', responseStatus: 400, errorCode: 'validation_failed' });
      expect((await rig.core.executions(eventId))[0]).toMatchObject({
        status: 'failed',
        error: 'action review (task.create) failed: validation_failed: project_id prj_missing does not exist',
      });
      expect(await rig.core.queue.claimActionRuns(1, rig.core.runner.leaseMs)).toEqual([]);
    });
  });

  describe('a run whose lease was taken over while its request was out', () => {
    it('records nothing for the old holder; the new holder’s attempt, under the same key, has no second effect', async () => {
      const eventId = await matched();
      const [stale] = await rig.core.queue.claimActionRuns(1, rig.core.runner.leaseMs);
      rig.core.clock.advance(rig.core.runner.leaseMs + 1);
      const other = new WorkQueue(rig.core.db, rig.core.clock);
      const [taken] = await other.claimActionRuns(1, rig.core.runner.leaseMs);
      const before = await rig.core.run(stale.id);

      expect(await rig.core.runner.perform(stale, rig.core.queue.owner)).toBe('running');
      expect(await rig.core.run(stale.id)).toEqual({ ...before, leaseOwner: other.owner, status: 'running', response: null });
      expect((await rig.core.executions(eventId))[0].status).toBe('running');
      expect(await rig.core.db.manager.count(ResourceProvenanceEntity)).toBe(0);

      expect(await rig.core.runner.perform(taken, other.owner)).toBe('succeeded');
      expect(rig.sim.requests.map((r) => [r.idempotencyKey, r.replayed ?? false])).toEqual([
        [stale.id, false],
        [stale.id, true],
      ]);
      expect(rig.sim.effectsByIdempotencyKey.get(stale.id)).toBe(1);
    });
  });
});
