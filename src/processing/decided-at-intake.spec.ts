/**
 * An event intake's commit would hand to the event loop, and that needs
 * nothing but its evaluation, is decided in that commit instead
 * (EventProcessor.deciderAtIntake, event-writer.ts FreshEventsHandOff.decider):
 * when no rule matches it, it is stored finished, `ignored`, with the
 * explanation and the resource snapshot its evaluation by the loop would have
 * left. Anything else is leased and handed over as before, a matched event
 * with its evaluation. On real SQLite and PostgreSQL databases, the core
 * services wired as workers.ts wires them.
 */
import { Logger } from '@nestjs/common';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import { statementsOf } from '../database/statements.js';
import type { FreshEvent } from '../intake/event-writer.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import type { EventEnvelope } from '../intake/envelope.js';
import type { ClaimedEvent } from './work.js';

const releasesOnly = aRule({
  id: 'releases-only',
  on: 'task.updated',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release' }] },
});
const toBlocked = aRule({
  id: 'to-blocked',
  on: 'task.updated',
  conditions: { all: [{ fact: 'changes', path: '$.status.from', operator: 'equal', value: 'blocked' }] },
});
const inArchivedProject = aRule({
  id: 'in-archived-project',
  on: 'task.updated',
  conditions: { all: [{ fact: 'project', params: { id: '{{ event.data.task.project_id }}' }, path: '$.status', operator: 'equal', value: 'archived' }] },
});
const cancelledByUpdates = aRule({ id: 'cancelled-by-updates', on: 'task.created', options: { cancelOn: ['task.updated'] } });

const kinds = await databasesUnderTest('events decided at intake');

const taskOf = (event: EventEnvelope) => event.data!.task as { id: string };
const taskKeyOf = (event: EventEnvelope) => `task:${taskOf(event).id}`;

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('events decided in the commit that stores them ($name)', (kind) => {
  let core: Core;
  let handed: ClaimedEvent[];
  let decided: FreshEvent[];

  beforeEach(async () => {
    core = await openCore(kind);
    handed = [];
    decided = [];
    core.writer.handOffTo({
      lease: () => core.queue.freshLease(100),
      decider: (sql, events, now) => core.processor.deciderAtIntake(sql, events, now),
      take: (leased, _complete, stored) => {
        handed.push(...leased);
        decided.push(...stored);
      },
    });
  });

  afterEach(() => core.close());

  const updated = (task: Record<string, unknown> = {}) => taskEvent('task.updated', { title: 'Routine update', ...task });
  const storeAll = (events: EventEnvelope[]) => Promise.all(events.map((event) => core.store(event)));

  it('stores an event no rule matches ignored and finished, explained and with its snapshot, and hands nothing over', async () => {
    core.useRules(releasesOnly);
    const event = updated();
    await core.store(event);

    expect(decided.map((e) => e.event_id)).toEqual([event.id]);
    expect(handed).toEqual([]);
    const stored = await core.event(event.id);
    const now = core.clock.now().toISOString();
    expect(stored).toMatchObject({ status: 'ignored', receivedAt: now, processedAt: now, leaseOwner: null, leaseUntil: null, attempts: 0, depth: 0, selfCaused: false });
    expect(await core.explanation(event.id)).toEqual([
      expect.objectContaining({ rule: 'releases-only', outcome: 'not_matched', conditions: [expect.objectContaining({ factValue: 'Routine update', result: false })] }),
    ]);
    const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey: taskKeyOf(event) });
    expect({ seq: Number(snapshot.eventSeq), payload: JSON.parse(snapshot.payload) as unknown }).toEqual({ seq: stored.seq, payload: taskOf(event) });
    expect(await core.queue.claimEvents(10)).toEqual([]);
  });

  it('stores as the event loop would have: the same columns and explanation as an event it evaluates', async () => {
    core.useRules(releasesOnly);
    const atIntake = updated();
    await core.store(atIntake);
    core.writer.handOffTo({ lease: () => undefined, take: () => undefined });
    const byTheLoop = updated();
    await core.store(byTheLoop);
    await core.processNext();

    const columns = async (eventId: string) => {
      const { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil, seenResource } = await core.event(eventId);
      return { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil, seenResource };
    };
    expect(await columns(atIntake.id)).toEqual(await columns(byTheLoop.id));
    expect(await core.explanation(atIntake.id)).toEqual(await core.explanation(byTheLoop.id));
  });

  it('hands over an event a rule matches, undecided, and the loop evaluates it as before', async () => {
    core.useRules(releasesOnly);
    const event = updated({ title: 'Release 2.0' });
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
    expect(await core.event(event.id)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
    expect(await core.processor.process(handed[0], core.queue.owner)).toHaveLength(1);
    expect(await core.event(event.id)).toMatchObject({ status: 'processed' });
  });

  it('hands over the evaluation of an event a rule matches with it, which the loop commits without evaluating again', async () => {
    core.useRules(releasesOnly);
    const event = updated({ title: 'Release 2.0' });
    await core.store(event);
    const [claim] = handed;
    // The rule no longer matches: the loop commits what the evaluation in intake's commit found.
    core.useRules(aRule({ ...releasesOnly.definition, conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'equal', value: 'never' }] } }));
    if (kind.name === 'postgres') {
      // Evaluated before the statement that leased it, the evaluation is not handed over: the loop evaluates again.
      expect(core.processor.evaluatedAt(claim).evaluated).toBeUndefined();
      expect(await core.processor.process(claim, core.queue.owner)).toHaveLength(0);
      expect(await core.event(event.id)).toMatchObject({ status: 'ignored' });
      return;
    }
    expect(await core.processor.process(core.processor.evaluatedAt(claim), core.queue.owner)).toHaveLength(1);
    expect(await core.event(event.id)).toMatchObject({ status: 'processed' });
    expect(await core.explanation(event.id)).toEqual([expect.objectContaining({ rule: 'releases-only', outcome: 'matched', ruleVersion: releasesOnly.version })]);
  });

  it('hands over the evaluation of the event stored, not of a duplicate of it about another resource in the same commit', async () => {
    core.useRules(releasesOnly);
    const event = updated({ title: 'Release A' });
    const duplicate = { ...event, data: { task: { ...taskOf(event), id: 'tsk_other', title: 'Release B' } } };
    await storeAll([event, duplicate]);

    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
    expect(core.processor.evaluatedAt(handed[0]).evaluated?.resource).toEqual(kind.name === 'sqlite' ? taskOf(event) : undefined);
  });

  it('computes `changes` from the snapshot the commit sees, one saved by an earlier event of the same commit included', async () => {
    core.useRules(toBlocked);
    const first = updated({ id: 'tsk_same', status: 'blocked' });
    const second = updated({ id: 'tsk_same', status: 'open' });
    await storeAll([first, second]);

    expect(decided.map((e) => e.event_id)).toEqual([first.id]);
    expect(await core.explanation(first.id)).toEqual([expect.objectContaining({ rule: 'to-blocked', outcome: 'not_matched' })]);
    if (kind.name === 'sqlite') {
      // The second saw the first's snapshot: it changed the status from blocked, so to-blocked matched and it is the loop's.
      expect(handed.map((e) => e.event_id)).toEqual([second.id]);
    } else {
      // PostgreSQL's statement leases one event of a resource per commit: the second waits, and a claim takes it after.
      expect(handed).toEqual([]);
      const [claimed] = await core.queue.claimEvents(10);
      expect(claimed?.event_id).toBe(second.id);
      await core.processor.process(claimed!, core.queue.owner);
      expect(await core.event(second.id)).toMatchObject({ status: 'processed' });
    }
  });

  it('leaves to the loop an event whose conditions ask the service (no lookup runs inside a commit)', async () => {
    core.useRules(inArchivedProject);
    const event = updated();
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
  });

  it('leaves to the loop an event whose type cancels waiting executions', async () => {
    core.useRules(releasesOnly, cancelledByUpdates);
    const event = updated();
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
  });

  it('leaves to the loop an event whose chain is blocked as a loop', async () => {
    core.useRules(releasesOnly);
    const event = updated();
    const resourceKey = taskKeyOf(event);
    await core.db.write((m) => m.insert(ResourceProvenanceEntity, {
      resourceKey, depth: core.config.maxChainDepth, actionRunId: 'run-1', ruleId: 'releases-only', changedAt: core.clock.now().toISOString(),
    }));
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
  });

  it('decides nothing behind an earlier event about its resource still waiting, nor behind a create in flight', async () => {
    core.useRules(releasesOnly);
    const waiting = updated({ id: 'tsk_w', title: 'Release 1' });
    const behind = updated({ id: 'tsk_w' });
    await core.store(waiting);
    await core.store(behind);
    await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:A' }, 10_000);
    core.clock.advance(1);
    await writeUnseen(core.writer, 'new-in-a', 'task:n1', { project_id: 'A' });

    expect(decided).toEqual([]);
    expect(await core.event(behind.id)).toMatchObject({ status: 'received', leaseOwner: null });
    expect(handed.map((e) => [e.event_id, e.held !== undefined])).toEqual([[waiting.id, false], ['new-in-a', true]]);
  });

  it('stores nothing for a duplicate: the first event’s row and snapshot stay', async () => {
    core.useRules(releasesOnly);
    const event = updated({ status: 'open' });
    await core.store(event);
    const again = { ...event, data: { task: { ...taskOf(event), status: 'done' } } };
    await core.store(again);

    expect(decided.map((e) => e.event_id)).toEqual([event.id]);
    const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey: taskKeyOf(event) });
    expect(JSON.parse(snapshot.payload)).toMatchObject({ status: 'open' });
  });

  it('leaves an event to the loop when its evaluation throws', async () => {
    core.useRules(releasesOnly);
    const broken = { event_id: 'x', type: 'task.updated', resource_key: 'task:x', payload: '{', depth: 0 };
    const now = core.clock.now().toISOString();
    const decided = await core.db.write(async (m) => (await core.processor.deciderAtIntake(statementsOf(m), [broken], now))!(broken));
    expect(decided).toBeUndefined();
  });
});

describe.each(kinds.filter((kind) => kind.name === 'postgres'))('events decided in the statement that stores their batch ($name)', (kind) => {
  let core: Core;
  let handed: ClaimedEvent[];
  let decided: FreshEvent[];

  /** The decider reads what the decisions rest on; then `meanwhile` commits in another transaction, before the batch's statement. */
  const decidingWith = (meanwhile: () => Promise<unknown>) => {
    core.writer.handOffTo({
      lease: () => core.queue.freshLease(100),
      decider: async (sql, events, now) => {
        const decide = await core.processor.deciderAtIntake(sql, events, now);
        await meanwhile();
        return decide;
      },
      take: (leased, _complete, stored) => {
        handed.push(...leased);
        decided.push(...stored);
      },
    });
  };

  beforeEach(async () => {
    core = await openCore(kind);
    handed = [];
    decided = [];
    core.useRules(releasesOnly);
  });

  afterEach(() => core.close());

  it('decides an event on what the statement sees: a snapshot saved since it was read leaves the event to the loop', async () => {
    const event = taskEvent('task.updated', { title: 'Routine update' });
    decidingWith(() => core.db.manager.insert(ResourceSnapshotEntity, { resourceKey: taskKeyOf(event), payload: '{"status":"blocked"}', eventSeq: 1, updatedAt: 'x' }));
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => [e.event_id, e.evaluated])).toEqual([[event.id, undefined]]);
    expect(await core.event(event.id)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
  });

  it('decides an event on what the statement sees: a provenance recorded since it was read leaves the event to the loop', async () => {
    const event = taskEvent('task.updated', { title: 'Routine update' });
    decidingWith(() => core.db.manager.insert(ResourceProvenanceEntity, {
      resourceKey: taskKeyOf(event), depth: 1, actionRunId: 'run-1', ruleId: 'releases-only', changedAt: core.clock.now().toISOString(),
    }));
    await core.store(event);

    expect(decided).toEqual([]);
    expect(handed.map((e) => e.event_id)).toEqual([event.id]);
    expect(await core.event(event.id)).toMatchObject({ status: 'received' });
  });

  it('hands a matched event over without its evaluation: a create that ended since the read makes it the engine’s own doing', async () => {
    const event = taskEvent('task.updated', { title: 'Release 4' });
    decidingWith(() => core.db.manager.insert(ResourceProvenanceEntity, {
      resourceKey: taskKeyOf(event), depth: 1, actionRunId: 'run-1', ruleId: 'releases-only', changedAt: core.clock.now().toISOString(),
    }));
    await core.store(event);

    const [claim] = handed;
    expect(core.processor.evaluatedAt(claim!).evaluated).toBeUndefined();
    await core.processor.process(claim!, core.queue.owner);
    // Its rule's own doing, one link further down the chain: ignored as self-caused, as the loop sees it now.
    expect(await core.event(event.id)).toMatchObject({ status: 'ignored', depth: 2 });
  });

  it('decides an event whose snapshot and provenance are as they were read, and saves its snapshot with it', async () => {
    const event = taskEvent('task.updated', { title: 'Routine update', status: 'open' });
    const resourceKey = taskKeyOf(event);
    await core.db.manager.insert(ResourceSnapshotEntity, { resourceKey, payload: '{"status":"blocked"}', eventSeq: 1, updatedAt: 'x' });
    await core.db.manager.insert(ResourceProvenanceEntity, { resourceKey, depth: 1, actionRunId: 'run-1', ruleId: 'other', changedAt: '2000-01-01T00:00:00.000Z' });
    decidingWith(async () => undefined);
    await core.store(event);

    expect(decided.map((e) => e.event_id)).toEqual([event.id]);
    const stored = await core.event(event.id);
    expect(stored).toMatchObject({ status: 'ignored', leaseOwner: null });
    const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey });
    expect({ seq: Number(snapshot.eventSeq), payload: JSON.parse(snapshot.payload) as unknown }).toEqual({ seq: stored.seq, payload: taskOf(event) });
  });

  it('hands a matched event held behind a create in flight over without the evaluation made before the create ends', async () => {
    core.useRules(aRule({ ...releasesOnly.definition, on: 'task.created' }));
    await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:A' }, 10_000);
    core.clock.advance(1);
    decidingWith(async () => undefined);
    await writeUnseen(core.writer, 'new-in-a', 'task:n1', { project_id: 'A', title: 'Release 3' });

    expect(handed.map((e) => [e.held !== undefined, core.processor.evaluatedAt(e).evaluated])).toEqual([[true, undefined]]);
  });
});
