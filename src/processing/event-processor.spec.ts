import { Logger } from '@nestjs/common';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { aRule } from '../../test/support/rule-factory.js';
import { EventProcessor } from './event-processor.js';
import { actionRunId } from './new-action-run.js';
import { EVENT_LEASE_MS, WorkQueue } from './work-queue.js';

const kinds = await databasesUnderTest('event processor');

const reviewInPrj1 = aRule({
  id: 'review-in-prj-1',
  conditions: { all: [{ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' }] },
});
const releasesOnly = aRule({
  id: 'releases-only',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release' }] },
});
const onCreation = aRule({ id: 'on-creation', on: 'task.created' });
const escalateBlocked = aRule({
  id: 'escalate-blocked',
  on: 'task.updated',
  conditions: {
    all: [
      { fact: 'changes', path: '$.status.to', operator: 'equal', value: 'blocked' },
      { fact: 'changes', path: '$.status.from', operator: 'equal', value: 'open' },
    ],
  },
});
const oncePerMinute = aRule({ id: 'once-per-minute', options: { throttle: { limit: 1, windowSeconds: 60 } } });

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${EventProcessor.name} on $name`, (kind) => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(kind);
  });

  afterEach(() => core.close());

  describe('an event a rule matches', () => {
    it('is processed, with a running execution whose first action run is pending', async () => {
      core.useRules(reviewInPrj1);
      const eventId = await core.store(taskEvent('task.completed'));
      expect((await core.processNext()).runs).toBe(1);

      const event = await core.event(eventId);
      expect(event).toMatchObject({ status: 'processed', processedAt: core.clock.now().toISOString(), leaseOwner: null, depth: 0 });
      const [execution] = await core.executions(eventId);
      expect(execution).toMatchObject({ ruleId: 'review-in-prj-1', ruleVersion: reviewInPrj1.version, status: 'running', finishedAt: null });
      expect(await core.runs(execution.id)).toEqual([
        expect.objectContaining({ id: actionRunId({ seq: event!.seq, id: eventId }, 'review-in-prj-1', 0), position: 0, type: 'task.create', status: 'pending', attempts: 0 }),
      ]);
    });

    it('explains every rule that listened, with each condition’s result, and leaves out the others', async () => {
      core.useRules(reviewInPrj1, releasesOnly, onCreation);
      const eventId = await core.store(taskEvent('task.completed', { title: 'Write docs' }));
      await core.processNext();

      const [execution] = await core.executions(eventId);
      expect(await core.explanation(eventId)).toEqual([
        expect.objectContaining({
          rule: 'releases-only',
          outcome: 'not_matched',
          conditions: [expect.objectContaining({ operator: 'matches', value: '^Release', factValue: 'Write docs', result: false })],
        }),
        expect.objectContaining({
          rule: 'review-in-prj-1',
          outcome: 'matched',
          execution: execution.id,
          conditions: [expect.objectContaining({ path: '$.data.task.project_id', value: 'prj_1', factValue: 'prj_1', result: true })],
        }),
      ]);
    });
  });

  describe('an event no rule matches', () => {
    it('is ignored, and the explanation shows the value that failed the condition', async () => {
      core.useRules(releasesOnly);
      const eventId = await core.store(taskEvent('task.completed', { title: 'Draft the notes' }));
      expect((await core.processNext()).runs).toBe(0);

      expect((await core.event(eventId)).status).toBe('ignored');
      expect(await core.executions(eventId)).toEqual([]);
      const [entry] = await core.explanation(eventId);
      expect(entry).toMatchObject({ rule: 'releases-only', outcome: 'not_matched', matched: false });
      expect(entry.conditions).toEqual([
        { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release', factValue: 'Draft the notes', result: false, group: 'all[0]' },
      ]);
    });
  });

  describe('a resource seen for the first time', () => {
    it('lets the later events about it pass a create in flight: they can no longer be that create’s doing', async () => {
      await writeUnseen(core.writer, 'first', 'task:tsk_a', { project_id: 'prj_1' });
      core.clock.advance(1);
      await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:prj_1' }, 60_000);
      core.clock.advance(1);
      await writeUnseen(core.writer, 'second', 'task:tsk_a', { project_id: 'prj_1' });
      await writeUnseen(core.writer, 'other', 'task:tsk_b', { project_id: 'prj_1' });
      expect((await core.processNext()).claim.event_id).toBe('first');
      // The create is still in flight: a new task of its project waits, the one just seen does not.
      expect((await core.queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['second']);
    });

    it('leaves the events stored after its snapshot seen by themselves: they pass a create in flight with no commit marking them', async () => {
      await writeUnseen(core.writer, 'first', 'task:tsk_a', { project_id: 'prj_1' });
      expect((await core.processNext()).claim.event_id).toBe('first');
      core.clock.advance(1);
      await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:prj_1' }, 60_000);
      core.clock.advance(1);
      await writeUnseen(core.writer, 'second', 'task:tsk_a', { project_id: 'prj_1' });
      await writeUnseen(core.writer, 'third', 'task:tsk_a', { project_id: 'prj_1' });
      await writeUnseen(core.writer, 'other', 'task:tsk_b', { project_id: 'prj_1' });
      // 'second' is about a resource with a snapshot: its commit marks nothing, and 'third' passes all the same.
      expect((await core.processNext()).claim.event_id).toBe('second');
      expect((await core.queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['third']);
    });
  });

  describe('the resources a batch is about', () => {
    it('reads their snapshots and provenance, but no snapshot on SQLite for an event held behind a create (its resource had none, and none comes before it)', async () => {
      const at = core.clock.now().toISOString();
      await core.db.write((m) => m.insert(ResourceSnapshotEntity, { resourceKey: 'task:tsk_a', payload: '{"id":"tsk_a"}', eventSeq: 1, updatedAt: at }));
      const held = { scope: { kind: 'task', parent: 'project:prj_1' }, receivedAt: at };

      const known = await core.processor.knownResources([{ resource_key: 'task:tsk_a' }]);
      expect([...known.snapshots.keys()]).toEqual(['task:tsk_a']);
      const heldOnly = await core.processor.knownResources([{ resource_key: 'task:tsk_a', held }]);
      expect([...heldOnly.snapshots.keys()]).toEqual(kind.name === 'sqlite' ? [] : ['task:tsk_a']);
    });
  });

  describe('a throttle of one execution per minute', () => {
    it('records the second match within the minute as throttled, with no action run', async () => {
      core.useRules(oncePerMinute);
      await core.store(taskEvent('task.completed'));
      const second = await core.store(taskEvent('task.completed'));
      expect((await core.processNext()).runs).toBe(1);
      expect((await core.processNext()).runs).toBe(0);

      const [throttled] = await core.executions(second);
      expect(throttled).toMatchObject({ status: 'throttled', finishedAt: core.clock.now().toISOString() });
      expect(await core.runs(throttled.id)).toEqual([]);
      expect((await core.event(second)).status).toBe('processed');
      expect(await core.explanation(second)).toEqual([expect.objectContaining({ outcome: 'throttled', execution: throttled.id })]);
    });

    it('lets a match through again once the minute has passed', async () => {
      core.useRules(oncePerMinute);
      await core.store(taskEvent('task.completed'));
      await core.processNext();
      core.clock.advance(60_001);
      const later = await core.store(taskEvent('task.completed'));
      expect((await core.processNext()).runs).toBe(1);
      expect((await core.executions(later)).map((x) => x.status)).toEqual(['running']);
    });
  });

  describe('a claim whose lease ran out and was taken by another worker', () => {
    it('commits nothing for the old holder, and everything once for the new one', async () => {
      core.useRules(reviewInPrj1);
      const eventId = await core.store(taskEvent('task.completed'));
      const [stale] = await core.queue.claimEvents(1);
      core.clock.advance(EVENT_LEASE_MS + 1);
      const other = new WorkQueue(core.db, core.clock);
      const [taken] = await other.claimEvents(1);

      expect(await core.processor.process(stale, core.queue.owner)).toEqual([]);
      expect(await core.event(eventId)).toMatchObject({ status: 'received', leaseOwner: other.owner, explanation: null });
      expect(await core.executions(eventId)).toEqual([]);
      expect(await core.db.manager.count(ResourceSnapshotEntity)).toBe(0);

      expect(await core.processor.process(taken, other.owner)).toHaveLength(1);
      expect((await core.event(eventId)).status).toBe('processed');
      expect(await core.executions(eventId)).toHaveLength(1);
    });
  });

  describe('the changes fact', () => {
    const task = { id: 'tsk_changes', title: 'Ship it', status: 'open' };

    it('is empty for the first event about a resource, which leaves its snapshot', async () => {
      core.useRules(escalateBlocked);
      const first = await core.store(taskEvent('task.updated', task));
      await core.processNext();

      expect((await core.event(first)).status).toBe('ignored');
      const [entry] = await core.explanation(first);
      expect(entry.conditions?.[0]).toMatchObject({ fact: 'changes', result: false });
      expect(entry.conditions?.[0]).not.toHaveProperty('factValue');
      const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey: 'task:tsk_changes' });
      expect(JSON.parse(snapshot.payload)).toEqual({ ...task, project_id: 'prj_1' });
    });

    it('is computed against the snapshot the previous event about the resource left', async () => {
      core.useRules(escalateBlocked);
      await core.store(taskEvent('task.updated', task));
      await core.processNext();
      const second = await core.store(taskEvent('task.updated', { ...task, status: 'blocked' }));
      expect((await core.processNext()).runs).toBe(1);

      const [entry] = await core.explanation(second);
      expect(entry.outcome).toBe('matched');
      expect(entry.conditions?.map((c) => [c.path, c.factValue])).toEqual([
        ['$.status.to', 'blocked'],
        ['$.status.from', 'open'],
      ]);
    });
  });
});
