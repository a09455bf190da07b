import { Logger } from '@nestjs/common';
import { databasesUnderTest } from '../../test/support/databases.js';
import { taskEvent, useCoreWithSimulator, type Core } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { waitUntil } from '../../test/support/wait.js';
import { RateBudget, type Budget } from '../actions/rate-budget.js';
import { SharedRateBudget } from '../actions/shared-rate-budget.js';
import type { Simulator } from '../simulator/simulator.js';
import { ActionRunner } from './action-runner.js';

const kinds = await databasesUnderTest('action runner and the rate budget');

const review = aRule({
  id: 'review',
  actions: [{ id: 'review', type: 'task.create', params: { project_id: 'prj_1', title: 'Review: {{ event.data.task.title }}' } }],
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${ActionRunner.name} on $name, when the rate budget is used up`, (kind) => {
  const rig = useCoreWithSimulator(kind);
  let sim: Simulator;
  let core: Core;
  /** One call a window: the budget of this process (SQLite), or the one replicas share (PostgreSQL), on a 1 s window (a grant lives 1 s: long enough for a loaded machine to use it). */
  let budget: Budget;

  // After the rig's own beforeEach, which opens a fresh core on the simulator.
  beforeEach(() => {
    ({ sim, core } = rig);
    const clock = () => core.clock.now().getTime();
    budget =
      kind.name === 'postgres'
        ? new SharedRateBudget({ db: core.db, replica: core.queue.owner, limitPerMinute: 1, clock, windowMs: 1_000, graceMs: 1_000 })
        : new RateBudget({ limitPerMinute: 1, clock, windowMs: 1_000 });
    core.client.useBudget(budget);
    core.useRules(review);
  });

  /** Two events matched: two action runs due. */
  async function twoRunsDue(): Promise<void> {
    for (const title of ['First', 'Second']) {
      await core.store(taskEvent('task.completed', { title }));
      await core.processNext();
    }
  }

  /**
   * Frees the budget: the engine's clock moves on (the run's next_attempt_at),
   * and on PostgreSQL real time passes too, until no grant is left in the span
   * (the shared budget reads the database's clock).
   */
  async function budgetFrees(ms: number): Promise<void> {
    core.clock.advance(ms);
    if (kind.name === 'postgres') {
      const inSpan = `SELECT COUNT(*)::int AS n FROM rate_budget_grants WHERE granted_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8 - 2100`;
      await waitUntil(async () => ((await core.db.dataSource.query(inSpan)) as Array<{ n: number }>)[0]!.n === 0, { timeoutMs: 5_000 });
    }
    await waitUntil(() => budget.room(1).free > 0, { timeoutMs: 5_000 });
  }

  it('hands the run back to the database, sending nothing, and sends it once when the budget frees', async () => {
    await twoRunsDue();
    expect((await core.performNext()).status).toBe('succeeded');

    const { claim, status } = await core.performNext();
    expect(status).toBe('pending');
    const waiting = await core.run(claim.id);
    expect(waiting).toMatchObject({ status: 'pending', attempts: 0, leaseOwner: null, leaseUntil: null, errorCode: null });
    expect(new Date(waiting.nextAttemptAt).getTime()).toBeGreaterThan(core.clock.now().getTime());
    expect(sim.requests.filter((r) => r.idempotencyKey === claim.id)).toHaveLength(0);
    expect(sim.requests).toHaveLength(1);
    // Not due before the budget frees: nothing to claim.
    await expect(core.queue.claimActionRuns(1, core.runner.leaseMs)).resolves.toEqual([]);

    await budgetFrees(new Date(waiting.nextAttemptAt).getTime() - core.clock.now().getTime());
    const again = await core.performNext();
    expect(again.claim.id).toBe(claim.id);
    expect(again.status).toBe('succeeded');
    expect(await core.run(claim.id)).toMatchObject({ status: 'succeeded', attempts: 1, leaseOwner: null });
    expect(sim.requests.filter((r) => r.idempotencyKey === claim.id)).toHaveLength(1);
    expect(sim.effectsByIdempotencyKey.get(claim.id)).toBe(1);
  });

  it('keeps a retrying run retrying, with its attempts so far', async () => {
    sim.setFaults({ script: [{ status: 503, method: 'POST', pathPrefix: '/tasks' }] });
    await twoRunsDue();
    const first = await core.performNext();
    expect(first.status).toBe('retrying');
    await budgetFrees(60_000);

    // The second run takes the slot; the first, due again, finds none.
    const second = await core.performNext();
    expect(second.claim.id).not.toBe(first.claim.id);
    expect(second.status).toBe('succeeded');
    const retry = await core.performNext();
    expect(retry).toMatchObject({ claim: { id: first.claim.id, attempts: 2 }, status: 'retrying' });
    expect(await core.run(first.claim.id)).toMatchObject({ status: 'retrying', attempts: 1, leaseOwner: null, errorCode: 'service_unavailable' });
    expect(sim.requests.filter((r) => r.idempotencyKey === first.claim.id)).toHaveLength(1);
  });

  it('changes nothing on a run whose lease it lost', async () => {
    await twoRunsDue();
    await core.performNext();
    const [claim] = await core.queue.claimActionRuns(1, core.runner.leaseMs);
    await expect(core.runner.perform(claim!, 'another-owner')).resolves.toBe('running');
    expect(await core.run(claim!.id)).toMatchObject({ status: 'running', attempts: 1, leaseOwner: core.queue.owner });
  });

  it('lets the workers claim only what the budget can start', async () => {
    expect(core.runner.room(8)).toEqual({ free: 1, waitMs: 0 });
    await twoRunsDue();
    await core.performNext();
    await core.performNext(); // handed back
    const room = core.runner.room(8);
    expect(room.free).toBe(0);
    expect(room.waitMs).toBeGreaterThan(0);
  });
});
