import { ActionRunEntity } from '../database/action-run.entity.js';
import { queryRows } from '../database/sql.js';
import { Metrics } from '../observability/metrics.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import { Replicas } from './replicas.js';
import type { ReplicaRow } from './replicas.watch.js';
import { WorkQueue } from './work-queue.js';

const kinds = await databasesUnderTest('replicas');

const DEAD_AFTER_MS = 5_000;

/** One engine process on the core's database: its own work queue (lease owner) and its replica registration. */
interface Process {
  queue: WorkQueue;
  replica: Replicas;
  metrics: Metrics;
}

describe.each(kinds)(`${Replicas.name} on $name`, (kind) => {
  let core: Core;
  /** The core's own queue is replica B's. */
  let a: Process;
  let b: Process;

  function aProcess(queue = new WorkQueue(core.db, core.clock)): Process {
    const metrics = new Metrics();
    return { queue, metrics, replica: new Replicas(core.config, core.clock, core.db, queue, metrics) };
  }

  beforeEach(async () => {
    core = await openCore(kind);
    core.useRules(aRule({ id: 'follow-up', on: 'task.completed' }));
    a = aProcess();
    b = aProcess(core.queue);
    await a.replica.register();
    await b.replica.register();
  });

  afterEach(() => core.close());

  const row = async (id: string) => (await queryRows<ReplicaRow>(core.db.manager, 'SELECT * FROM replicas WHERE id = ?', [id]))[0];

  /** `survivor` sees `dead`'s heartbeat, then it stands still for REPLICA_DEAD_AFTER_MS and `survivor` beats again. */
  async function heartbeatStops(...survivors: Process[]) {
    for (const s of survivors) await s.replica.beat();
    core.clock.advance(DEAD_AFTER_MS);
  }

  /** A waiting event leased to A, and an action run (of an earlier event, evaluated by B) leased to A. */
  async function aHoldsWork() {
    await core.store(taskEvent('task.completed'));
    await core.processNext();
    await core.store(taskEvent('task.completed'));
    const [run] = await a.queue.claimActionRuns(1, core.runner.leaseMs);
    const [event] = await a.queue.claimEvents(1);
    expect([run?.id, event?.event_id]).toEqual([expect.any(String), expect.any(String)]);
    return { run, event };
  }

  describe('taking over a dead replica', () => {
    it('hands its waiting events and unfinished action runs back at once, long before their leases run out', async () => {
      const { run, event } = await aHoldsWork();
      await heartbeatStops(b);
      expect(await b.replica.beat()).toEqual([{ replica: a.replica.id, events: 1, actionRuns: 1 }]);
      expect(await core.event(event.event_id)).toMatchObject({ leaseOwner: null, leaseUntil: null, status: 'received' });
      expect(await core.run(run.id)).toMatchObject({ leaseOwner: null, leaseUntil: null, status: 'running' });
      // 5 s after the claim: the event's lease (15 s) and the run's (SERVICE_TIMEOUT_MS + 5 s) would still hold.
      expect((await b.queue.claimEvents(10)).map((e) => e.event_id)).toEqual([event.event_id]);
      expect((await b.queue.claimActionRuns(10, core.runner.leaseMs)).map((r) => r.id)).toEqual([run.id]);
      expect(await row(a.replica.id)).toMatchObject({ dead_at: core.clock.now().toISOString(), stopped_at: null });
    });

    it('leaves a replica alone while its heartbeat moves, and takes it once it stands still', async () => {
      await aHoldsWork();
      await b.replica.beat();
      core.clock.advance(DEAD_AFTER_MS - 1_000);
      await a.replica.beat();
      core.clock.advance(1_000);
      expect(await b.replica.beat()).toEqual([]);
      core.clock.advance(DEAD_AFTER_MS - 1);
      expect(await b.replica.beat()).toEqual([]);
      core.clock.advance(1);
      expect(await b.replica.beat()).toEqual([expect.objectContaining({ replica: a.replica.id, events: 1 })]);
    });

    it('stops a create it held from holding back events of its scope (causal barrier) as soon as it is declared dead', async () => {
      const run = await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:A' }, core.runner.leaseMs);
      await core.db.write((m) => m.update(ActionRunEntity, { id: run }, { leaseOwner: a.queue.owner }));
      await writeUnseen(core.writer, 'new-task-in-A', 'task:9', { project_id: 'A' });
      expect(await b.queue.claimEvents(10)).toEqual([]);
      await heartbeatStops(b);
      expect(await b.queue.claimEvents(10)).toEqual([]);
      expect(await b.replica.beat()).toEqual([{ replica: a.replica.id, events: 0, actionRuns: 1 }]);
      expect((await b.queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['new-task-in-A']);
    });

    it('declares a stale replica dead exactly once when two survivors see it at the same time', async () => {
      await aHoldsWork();
      const c = aProcess();
      await c.replica.register();
      await b.replica.beat();
      await c.replica.beat();
      // Halfway, each survivor sees the other's heartbeat move (so neither can take the other below).
      core.clock.advance(DEAD_AFTER_MS / 2);
      for (const survivor of [b, c, b]) await survivor.replica.beat();
      core.clock.advance(DEAD_AFTER_MS / 2);
      const [byB, byC] = await Promise.all([b.replica.beat(), c.replica.beat()]);
      expect([...byB, ...byC]).toEqual([{ replica: a.replica.id, events: 1, actionRuns: 1 }]);
      expect(await row(a.replica.id)).toMatchObject({ dead_at: core.clock.now().toISOString() });
      expect(await row(b.replica.id)).toMatchObject({ dead_at: null });
      expect(await row(c.replica.id)).toMatchObject({ dead_at: null });
    });

    it('does not take over a replica that stopped gracefully', async () => {
      await b.replica.beat();
      await a.replica.beforeApplicationShutdown();
      core.clock.advance(DEAD_AFTER_MS);
      expect(await b.replica.beat()).toEqual([]);
      expect(await row(a.replica.id)).toMatchObject({ stopped_at: expect.any(String), dead_at: null });
    });
  });

  describe('a replica that comes back after being declared dead', () => {
    it('is alive again at its next beat, and commits nothing on the work it lost while the survivor commits it', async () => {
      const { run, event } = await aHoldsWork();
      const aEvaluated = await core.processor.prepare(event);
      await heartbeatStops(b);
      await b.replica.beat();
      const [bEvent] = await b.queue.claimEvents(1);
      const [bRun] = await b.queue.claimActionRuns(1, core.runner.leaseMs);

      await a.replica.beat();
      expect(await row(a.replica.id)).toMatchObject({ dead_at: null, heartbeat_at: core.clock.now().toISOString() });

      // A's commits of the event and of the run it held change nothing.
      expect(await core.processor.commitAll([aEvaluated], a.queue.owner)).toEqual([]);
      expect(await core.runner.perform(run, a.queue.owner)).toBe('running');
      expect(await core.event(event.event_id)).toMatchObject({ status: 'received', leaseOwner: b.queue.owner });
      expect(await core.executions(event.event_id)).toEqual([]);
      expect(await core.run(run.id)).toMatchObject({ status: 'running', leaseOwner: b.queue.owner });

      // B's do.
      expect(await core.processor.process(bEvent, b.queue.owner)).toHaveLength(1);
      expect(await core.runner.perform(bRun, b.queue.owner)).toBe('skipped');
      expect(await core.event(event.event_id)).toMatchObject({ status: 'processed', leaseOwner: null });
      expect(await core.executions(event.event_id)).toHaveLength(1);
      expect(await core.run(run.id)).toMatchObject({ status: 'skipped', leaseOwner: null });
    });
  });

  describe('what it reports', () => {
    it('writes the events and action runs it has done at each beat, and counts the replicas by status for the metrics', async () => {
      a.replica.countEvents(3);
      a.replica.countEvents(2);
      a.replica.countActionRuns(4);
      await a.replica.beat();
      const { events_done, action_runs_done } = await row(a.replica.id);
      expect([Number(events_done), Number(action_runs_done)]).toEqual([5, 4]);

      const c = aProcess();
      await c.replica.register();
      await c.replica.beforeApplicationShutdown();
      await a.replica.beat();
      const text = await a.metrics.registry.metrics();
      expect(text).toContain(`engine_replica_info{replica="${a.replica.id}",host="${a.replica.host}",version="0.1.0"} 1`);
      expect(text).toMatch(/engine_replicas\{status="alive"\} 2\n/);
      expect(text).toMatch(/engine_replicas\{status="stopped"\} 1\n/);
      expect(text).toMatch(/engine_replicas\{status="dead"\} 0\n/);
    });

    it('registers under its work queue\'s lease owner id, with its host, pid and version', async () => {
      expect(await row(a.replica.id)).toMatchObject({ id: a.queue.owner, host: a.replica.host, pid: process.pid, version: '0.1.0', dead_at: null, stopped_at: null });
    });
  });
});
