/**
 * An event intake's commit would hand to the event loop, and that needs
 * nothing but its evaluation, is decided in that commit instead
 * (EventProcessor.deciderAtIntake, event-writer.ts FreshEventsHandOff.decider):
 * when no rule matches it, it is stored finished, `ignored`, with the
 * explanation and the resource snapshot its evaluation by the loop would have
 * left. Anything else is leased and handed over as before, a matched event
 * with its evaluation. On SQLite a matched event is decided too, with its
 * executions and first runs; on PostgreSQL, whose batch is one statement,
 * only an event alone in its batch with its resource, evaluated on what it
 * assumes and the statement checks. On real databases, the core services
 * wired as workers.ts wires them.
 */
import { Logger } from '@nestjs/common';
import { scopeOfEvent } from '../causal-scope.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import { statementsOf } from '../database/statements.js';
import type { FreshEvent, FreshLease } from '../intake/event-writer.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { openCore, taskEvent, type Core, type CoreOptions } from '../../test/support/core.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import type { EventEnvelope } from '../intake/envelope.js';
import { actionRunId } from './new-action-run.js';
import type { ClaimedEvent, CreatedRun } from './work.js';

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

/** Stored in one commit: written together, they join one batch. */
const storeTogether = (core: Core, events: EventEnvelope[]) => Promise.all(events.map((event) => core.store(event)));

const taskOf = (event: EventEnvelope) => event.data!.task as { id: string };
const taskKeyOf = (event: EventEnvelope) => `task:${taskOf(event).id}`;

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('events decided in the commit that stores them on $name', (kind) => {
  let core: Core;
  let handed: ClaimedEvent[];
  let decided: FreshEvent[];
  /** PostgreSQL stores a batch with one statement: only an event alone in it with its resource is decided there. */
  const onPostgres = kind.name === 'postgres';

  beforeEach(async () => {
    core = await openCore(kind);
    handed = [];
    decided = [];
    // As workers.ts asks it.
    handOff(() => core.queue.freshLease(100));
  });

  afterEach(() => core.close());

  /** Intake's hand-off as workers.ts wires it, leasing as `lease` says: what it leases and decides goes to `handed`, `decided`. */
  function handOff(lease: () => FreshLease | undefined, taken: (complete: boolean) => void = () => undefined): void {
    core.writer.handOffTo({
      lease,
      decider: (sql, events, now) => core.processor.deciderAtIntake(sql, events, now),
      take: (leased, complete, stored) => {
        handed.push(...leased);
        decided.push(...stored);
        taken(complete);
      },
    });
  }

  const updated = (task: Record<string, unknown> = {}) => taskEvent('task.updated', { title: 'Routine update', ...task });
  const storeAll = (events: EventEnvelope[]) => storeTogether(core, events);

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
    // PostgreSQL evaluates neither of two events with one id in a batch: the loop evaluates the one stored.
    expect(core.processor.evaluatedAt(handed[0]).evaluated?.resource).toEqual(onPostgres ? undefined : taskOf(event));
  });

  it('computes `changes` from the snapshot the commit sees, one saved by an earlier event of the same commit included', async () => {
    core.useRules(toBlocked);
    const first = updated({ id: 'tsk_same', status: 'blocked' });
    const second = updated({ id: 'tsk_same', status: 'open' });
    await storeAll([first, second]);

    if (onPostgres) {
      // Neither is decided there: the first is leased to the loop, the second waits behind it.
      expect({ decided, handed: handed.map((e) => e.event_id) }).toEqual({ decided: [], handed: [first.id] });
      return;
    }
    // The second saw the first's snapshot: it changed the status from blocked, so to-blocked matched and it is the loop's.
    expect(decided.map((e) => e.event_id)).toEqual([first.id]);
    expect(handed.map((e) => e.event_id)).toEqual([second.id]);
    expect(await core.explanation(first.id)).toEqual([expect.objectContaining({ rule: 'to-blocked', outcome: 'not_matched' })]);
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

  it('decides what it can when the event loop has no room for more, and leaves the rest unleased for a claim', async () => {
    let complete: boolean | undefined;
    // As workers.ts asks it while the loop holds as many handed events as it may (HANDED_MAX).
    handOff(() => core.queue.freshLease(0), (all) => (complete = all));
    const inArchived = aRule({ ...inArchivedProject.definition, on: 'task.created' });
    core.useRules(releasesOnly, inArchived);
    const routine = updated();
    const asksTheService = taskEvent('task.created', { title: 'New' });
    await storeAll([routine, asksTheService]);

    expect(decided.map((e) => e.event_id)).toEqual([routine.id]);
    expect(handed).toEqual([]);
    expect(complete).toBe(false);
    expect(await core.event(routine.id)).toMatchObject({ status: 'ignored', leaseOwner: null });
    expect(await core.event(asksTheService.id)).toMatchObject({ status: 'received', leaseOwner: null });
    expect((await core.queue.claimEvents(10)).map((e) => e.event_id)).toEqual([asksTheService.id]);
  });

  it('decides nothing and leases nothing without a lease (the event loop is stopped)', async () => {
    core.useRules(releasesOnly);
    handOff(() => undefined);
    const routine = updated();
    await core.store(routine);

    expect(decided).toEqual([]);
    expect(await core.event(routine.id)).toMatchObject({ status: 'received', leaseOwner: null });
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

  it('decides a new resource that an earlier event of the same commit has given its first snapshot: it is seen, not held behind a create', async () => {
    core.useRules(releasesOnly);
    await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:B' }, 10_000);
    core.clock.advance(1);
    // One task, first in project A (no create in flight there), then moved to B, where a create is in flight.
    const inA = updated({ id: 'tsk_moved', project_id: 'A' });
    const inB = updated({ id: 'tsk_moved', project_id: 'B' });
    await Promise.all([inA, inB].map((event) => core.writer.write({
      eventId: event.id, type: event.type, resourceKey: 'task:tsk_moved', scope: scopeOfEvent('task:tsk_moved', event.data),
      source: 'webhook', payload: JSON.stringify(event),
    })));

    if (onPostgres) {
      // Two events about one resource in one statement: the first is leased (not held: A has no create in flight), the second waits.
      expect({ decided, handed: handed.map((e) => [e.event_id, e.held !== undefined]) }).toEqual({ decided: [], handed: [[inA.id, false]] });
      return;
    }
    expect(decided.map((e) => e.event_id)).toEqual([inA.id, inB.id]);
    expect(handed).toEqual([]);
    expect(await core.event(inB.id)).toMatchObject({ status: 'ignored', seenResource: true });
  });

  it('stores each event seen or not as its resource’s snapshot says, the commit binding what it read for the batch', async () => {
    core.useRules(releasesOnly);
    await storeAll([updated({ id: 'tsk_known' }), updated({ id: 'tsk_known_too' })]);
    // A resource seen in an earlier commit, decided; another, matched, handed over undecided; a new one, decided.
    const seenBefore = updated({ id: 'tsk_known' });
    const matched = updated({ id: 'tsk_known_too', title: 'Release 2' });
    const fresh = updated({ id: 'tsk_new' });
    await storeAll([seenBefore, matched, fresh]);

    expect(decided.map((e) => e.event_id)).toEqual(expect.arrayContaining([seenBefore.id, fresh.id]));
    expect(handed.map((e) => e.event_id)).toEqual([matched.id]);
    const seen = async (event: EventEnvelope) => (await core.event(event.id)).seenResource;
    expect([await seen(seenBefore), await seen(matched), await seen(fresh)]).toEqual([true, true, false]);
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
    const decided = await core.db.write(async (m) => (await core.processor.deciderAtIntake(statementsOf(m), [broken], now))!.decide(broken));
    expect(decided).toBeUndefined();
  });
});

describe.each(kinds)('events a rule matches, decided in the commit that stores them with their executions and first runs on $name', (kind) => {
  let core: Core;
  let handed: ClaimedEvent[];
  let decided: FreshEvent[];
  let made: CreatedRun[];
  /** How many first runs intake's next commit may lease to this process (workers.ts: the action loop's room). */
  let room: number;
  /** PostgreSQL's statement reads nothing first: an event is decided alone in its batch with its resource, and not where a rule counts what came before. */
  const onPostgres = kind.name === 'postgres';

  beforeEach(() => open());

  /** An engine's core on a fresh database, its intake's hand-off as workers.ts wires it. */
  async function open(options?: CoreOptions): Promise<void> {
    core = await openCore(kind, options);
    [handed, decided, made, room] = [[], [], [], 10];
    core.writer.handOffTo<CreatedRun>({
      lease: () => core.queue.freshLease(100),
      decider: (sql, events, now) => core.processor.deciderAtIntake(sql, events, now, core.queue.handOff(core.runner.leaseMs, room)),
      take: (leased, _complete, stored, runs) => {
        handed.push(...leased);
        decided.push(...stored);
        made.push(...runs);
      },
    });
  }

  afterEach(() => core.close());

  const release = (task: Record<string, unknown> = {}) => taskEvent('task.updated', { title: 'Release 2.0', ...task });

  it('stores the event processed and finished, its execution and its first run leased to this process, and hands the run over', async () => {
    core.useRules(releasesOnly);
    const event = release();
    await core.store(event);

    expect({ decided: decided.map((e) => e.event_id), handed }).toEqual({ decided: [event.id], handed: [] });
    const now = core.clock.now().toISOString();
    const stored = await core.event(event.id);
    expect(stored).toMatchObject({ status: 'processed', processedAt: now, leaseOwner: null, leaseUntil: null, attempts: 0, depth: 0, selfCaused: false });
    const [execution] = await core.executions(event.id);
    expect(execution).toMatchObject({ eventSeq: stored.seq, ruleId: 'releases-only', status: 'running', createdAt: now });
    expect(await core.explanation(event.id)).toEqual([expect.objectContaining({ rule: 'releases-only', outcome: 'matched', execution: execution.id })]);
    const [run] = await core.runs(execution.id);
    expect(run).toMatchObject({ status: 'running', leaseOwner: core.queue.owner, attempts: 1, position: 0, type: 'task.create' });
    expect(JSON.parse(run.request!)).toMatchObject({ method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review' } });
    expect(made).toEqual([expect.objectContaining({ leased: true, run: expect.objectContaining({ id: run.id, execution_id: execution.id }), execution: expect.objectContaining({ id: execution.id, ruleId: 'releases-only' }) })]);
    expect(await core.queue.claimEvents(10)).toEqual([]);
  });

  it('stores what the event loop would have: the same event, execution and first run as for an event it commits', async () => {
    core.useRules(releasesOnly);
    const atIntake = release({ id: 'tsk_intake' });
    await core.store(atIntake);
    core.writer.handOffTo({ lease: () => undefined, take: () => undefined });
    const byTheLoop = release({ id: 'tsk_loop' });
    await core.store(byTheLoop);
    await core.processNext();

    const rows = async (eventId: string) => {
      const { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil, seenResource } = await core.event(eventId);
      const [{ ruleId, ruleVersion, status: executionStatus, conditions, ruleSnapshot, createdAt, finishedAt, facts, id }] = await core.executions(eventId);
      const [run] = await core.runs(id);
      const explanation = (await core.explanation(eventId)).map((entry) => ({ ...entry, execution: entry.execution === id }));
      return {
        event: { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil, seenResource, explanation },
        execution: { ruleId, ruleVersion, executionStatus, conditions, ruleSnapshot, createdAt, finishedAt, facts },
        run: { status: run.status, type: run.type, position: run.position, request: run.request, nextAttemptAt: run.nextAttemptAt, resourceKey: run.resourceKey?.replace(/tsk_\w+/, 'tsk') },
      };
    };
    const loop = await rows(byTheLoop.id);
    // The loop's run is pending (its test hands nothing over); intake's is leased to this process.
    expect(await rows(atIntake.id)).toEqual({ ...loop, run: { ...loop.run, status: 'running' } });
  });

  it('stores the first run unleased when the action loop has no room: the action claim takes it', async () => {
    core.useRules(releasesOnly);
    room = 0;
    const event = release();
    await core.store(event);

    expect(made).toEqual([expect.objectContaining({ leased: false })]);
    expect(await core.run(made[0].run.id)).toMatchObject({ status: 'pending', leaseOwner: null });
    expect((await core.queue.claimActionRuns(10, core.runner.leaseMs)).map((run) => run.id)).toEqual([made[0].run.id]);
  });

  it('counts a throttle in the commit: the second of two events over the limit is throttled', async () => {
    core.useRules(aRule({ ...releasesOnly.definition, options: { throttle: { limit: 1, windowSeconds: 60, key: 'all' } } }));
    const [first, second] = [release({ id: 'tsk_1' }), release({ id: 'tsk_2' })];
    await storeTogether(core, [first, second]);

    if (onPostgres) {
      // The count is read in the event loop's commit: both go there with their evaluations, which it commits in order.
      expect({ decided, handed: handed.map((e) => e.event_id) }).toEqual({ decided: [], handed: [first.id, second.id] });
      const evaluated = handed.map((e) => core.processor.evaluatedAt(e));
      expect(evaluated.map((e) => e.evaluated?.verdict.status)).toEqual(['processed', 'processed']);
      await core.processor.commitAll(await Promise.all(evaluated.map((e) => core.processor.prepare(e))), core.queue.owner);
      expect({ first: (await core.executions(first.id)).map((e) => e.status), second: (await core.executions(second.id)).map((e) => e.status) })
        .toEqual({ first: ['running'], second: ['throttled'] });
      return;
    }
    expect(decided.map((e) => e.event_id)).toEqual([first.id, second.id]);
    expect((await core.executions(first.id)).map((e) => e.status)).toEqual(['running']);
    expect((await core.executions(second.id)).map((e) => e.status)).toEqual(['throttled']);
    expect(await core.explanation(second.id)).toEqual([expect.objectContaining({ rule: 'releases-only', outcome: 'throttled' })]);
    expect(made.map(({ execution }) => execution.eventId)).toEqual([first.id]);
  });

  it('leaves a later event about the same resource in the same commit waiting behind the first one\'s run', async () => {
    core.useRules(releasesOnly);
    const [first, second] = [release({ id: 'tsk_same' }), release({ id: 'tsk_same', title: 'Release 2.1' })];
    await storeTogether(core, [first, second]);

    // PostgreSQL decides neither of two events about one resource in one statement: the first is handed over.
    expect(decided.map((e) => e.event_id)).toEqual(onPostgres ? [] : [first.id]);
    expect(handed.map((e) => e.event_id)).toEqual(onPostgres ? [first.id] : []);
    expect(await core.event(second.id)).toMatchObject({ status: 'received', leaseOwner: null });
    expect(await core.queue.claimEvents(10)).toEqual([]);
  });

  it('writes each event\'s execution and first run with its own seq, several in one commit, the run\'s id as the loop\'s', async () => {
    core.useRules(releasesOnly);
    const events = [1, 2, 3].map((i) => release({ id: `tsk_many_${i}` }));
    await storeTogether(core, events);

    expect(decided.map((e) => e.event_id).sort()).toEqual(events.map((e) => e.id).sort());
    for (const event of events) {
      const { seq } = await core.event(event.id);
      const [execution] = await core.executions(event.id);
      const [run] = await core.runs(execution.id);
      expect({ execution: execution.eventSeq, run: run.eventSeq, id: run.id }).toEqual({ execution: seq, run: seq, id: actionRunId({ seq, id: event.id }, 'releases-only', 0) });
      expect(made.find((m) => m.execution.eventId === event.id)).toMatchObject({ run: { id: run.id, event_seq: seq }, execution: { id: execution.id, eventSeq: seq } });
    }
  });

  it('writes no second execution for a duplicate of an event it decided', async () => {
    core.useRules(releasesOnly);
    const event = release();
    await core.store(event);
    await core.store(event);
    await storeTogether(core, [event, release({ id: 'tsk_other' })]);

    expect(decided.filter((e) => e.event_id === event.id)).toHaveLength(1);
    expect(await core.executions(event.id)).toHaveLength(1);
    expect(made.filter(({ execution }) => execution.eventId === event.id)).toHaveLength(1);
  });

  it('decides no new resource held behind a create in flight: it is handed over held, with nothing written for it', async () => {
    core.useRules(aRule({ ...releasesOnly.definition, on: 'task.created' }));
    await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:A' }, 10_000);
    core.clock.advance(1);
    await writeUnseen(core.writer, 'release-in-a', 'task:n1', { project_id: 'A', title: 'Release 3' });
    await writeUnseen(core.writer, 'release-in-b', 'task:n2', { project_id: 'B', title: 'Release 3' });

    expect(decided.map((e) => e.event_id)).toEqual(['release-in-b']);
    expect(handed.map((e) => [e.event_id, e.held !== undefined])).toEqual([['release-in-a', true]]);
    expect(core.processor.evaluatedAt(handed[0]).evaluated).toBeUndefined();
    expect({ held: await core.executions('release-in-a'), free: (await core.executions('release-in-b')).length }).toEqual({ held: [], free: 1 });
    expect(made.map(({ execution }) => execution.eventId)).toEqual(['release-in-b']);
  });

  /** As intake stores a webhook: with its parse (the first request is rendered from it). */
  const storeParsed = (events: EventEnvelope[]) => Promise.all(events.map((event) => core.writer.write({
    eventId: event.id, type: event.type, resourceKey: taskKeyOf(event), source: 'webhook', payload: JSON.stringify(event), envelope: event,
  })));
  /** Not run dry (a dry run records no provenance); the service is never called here. */
  const changing = async (params: Record<string, string>) => {
    await core.close();
    await open({ serviceUrl: 'http://127.0.0.1:9/v1' });
    core.useRules(aRule({ ...releasesOnly.definition, actions: [{ type: 'task.update', params: { status: 'done', ...params } }] }));
  };
  const provenanceOf = (resourceKey: string) => core.db.manager.findOneByOrFail(ResourceProvenanceEntity, { resourceKey });

  it('decides an event whose first action changes a resource, and records that resource\'s provenance by its run', async () => {
    await changing({ id: '{{ event.data.task.id }}' });
    const event = release({ id: 'tsk_changed' });
    await storeParsed([event]);

    expect(decided.map((e) => e.event_id)).toEqual([event.id]);
    const [execution] = await core.executions(event.id);
    const [run] = await core.runs(execution.id);
    const provenance = await provenanceOf('task:tsk_changed');
    expect({ type: run.type, by: provenance.actionRunId, rule: provenance.ruleId, depth: provenance.depth }).toEqual({ type: 'task.update', by: run.id, rule: 'releases-only', depth: 0 });
  });

  it('decides only the first of two events of a commit whose first actions change one resource: the other goes to the loop on PostgreSQL', async () => {
    await changing({ id: 'tsk_shared' });
    const [first, second] = [release({ id: 'tsk_a' }), release({ id: 'tsk_b' })];
    await storeParsed([first, second]);

    // PostgreSQL's statement writes one provenance a resource; SQLite's commit writes each event's in turn.
    expect(decided.map((e) => e.event_id)).toEqual(onPostgres ? [first.id] : [first.id, second.id]);
    const runOf = async (event: EventEnvelope) => (await core.runs((await core.executions(event.id))[0].id))[0];
    if (onPostgres) {
      expect(handed.map((e) => e.event_id)).toEqual([second.id]);
      expect((await provenanceOf('task:tsk_shared')).actionRunId).toBe((await runOf(first)).id);
      await core.processor.commitAll([await core.processor.prepare(core.processor.evaluatedAt(handed[0]))], core.queue.owner);
    }
    expect((await provenanceOf('task:tsk_shared')).actionRunId).toBe((await runOf(second)).id);
  });

  it('leaves to the event loop an event a debounced rule matched on PostgreSQL, whose commit reads what came before', async () => {
    core.useRules(aRule({ ...releasesOnly.definition, options: { debounce: { seconds: 60, key: '{{ event.data.task.id }}' } } }));
    const event = release({ id: 'tsk_debounced' });
    await core.store(event);

    expect({ decided: decided.length, handed: handed.length }).toEqual(onPostgres ? { decided: 0, handed: 1 } : { decided: 1, handed: 0 });
    if (onPostgres) await core.processor.commitAll([await core.processor.prepare(core.processor.evaluatedAt(handed[0]))], core.queue.owner);
    expect((await core.executions(event.id)).map((e) => e.status)).toEqual(['waiting']);
  });

  it('counts the events it decides in the metrics as processed or ignored, and the rules they matched', async () => {
    core.useRules(releasesOnly);
    const [matched, unmatched] = [release({ id: 'tsk_m' }), taskEvent('task.updated', { id: 'tsk_u', title: 'Routine update' })];
    await storeTogether(core, [matched, unmatched]);
    core.processor.countDecided(decided);

    const text = await core.metrics.registry.metrics();
    expect(text).toMatch(/events_processed_total\{[^}]*status="processed"[^}]*\} 1/);
    expect(text).toMatch(/events_processed_total\{[^}]*status="ignored"[^}]*\} 1/);
    expect(text).toMatch(/rule_matches_total\{[^}]*rule="releases-only"[^}]*\} 1\n/);
  });

  it('counts no match of an event it did not decide (held behind a create in flight): the event loop counts it', async () => {
    core.useRules(aRule({ ...releasesOnly.definition, on: 'task.created' }));
    await writeCreatingRun(core.db, core.clock, { kind: 'task', parent: 'project:A' }, 10_000);
    core.clock.advance(1);
    await writeUnseen(core.writer, 'release-in-a', 'task:n1', { project_id: 'A', title: 'Release 3' });

    expect(handed.map((e) => e.event_id)).toEqual(['release-in-a']);
    expect(await core.metrics.registry.metrics()).not.toMatch(/rule_matches_total\{[^}]*rule="releases-only"/);
  });
});

describe.each(kinds.filter((kind) => kind.name === 'postgres'))('intake\'s commits on $name', (kind) => {
  let core: Core;
  let handed: ClaimedEvent[];
  let decided: string[];

  beforeEach(async () => {
    core = await openCore(kind);
    handed = [];
    decided = [];
    // Intake's hand-off as workers.ts wires it on PostgreSQL: what it leases goes to `handed`, what it decides to `decided`.
    core.writer.handOffTo({
      lease: () => core.queue.freshLease(100),
      decider: (sql, events, at) => core.processor.deciderAtIntake(sql, events, at),
      take: (leased, _complete, stored) => {
        handed.push(...leased);
        decided.push(...stored.map((e) => e.event_id));
      },
    });
  });

  afterEach(() => core.close());

  it('decide reading nothing first: an event whose evaluation read a snapshot its resource has is the loop\'s, evaluated again there', async () => {
    core.useRules(toBlocked);
    const event = taskEvent('task.updated', { id: 'tsk_was_blocked', title: 'Routine update', status: 'open' });
    const now = core.clock.now().toISOString();
    await core.db.write((m) => m.insert(ResourceSnapshotEntity, { resourceKey: taskKeyOf(event), payload: JSON.stringify({ ...taskOf(event), status: 'blocked' }), eventSeq: 1, updatedAt: now }));
    await core.store(event);

    // Evaluated as if the task were new, to-blocked did not match: that evaluation is not the one stored.
    expect({ decided, handed: handed.map((e) => e.event_id) }).toEqual({ decided: [], handed: [event.id] });
    expect(core.processor.evaluatedAt(handed[0]).evaluated).toBeUndefined();
    expect(await core.processor.process(handed[0], core.queue.owner)).toHaveLength(1);
    expect(await core.explanation(event.id)).toEqual([expect.objectContaining({ rule: 'to-blocked', outcome: 'matched' })]);
  });

  it('decide an event about a resource with a snapshot when its evaluation did not read it, saving the new one', async () => {
    core.useRules(releasesOnly);
    const first = taskEvent('task.updated', { id: 'tsk_known', title: 'Routine update', status: 'open' });
    const second = taskEvent('task.updated', { id: 'tsk_known', title: 'Routine update', status: 'done' });
    await core.store(first);
    await core.store(second);

    expect({ decided, handed }).toEqual({ decided: [first.id, second.id], handed: [] });
    const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey: taskKeyOf(second) });
    expect({ seq: Number(snapshot.eventSeq), status: (JSON.parse(snapshot.payload) as { status: string }).status }).toEqual({ seq: (await core.event(second.id)).seq, status: 'done' });
    expect(await core.event(second.id)).toMatchObject({ status: 'ignored', seenResource: true });
  });

  it('decide no event about a resource an action touched (its chain is the loop\'s to read), nor hand over its evaluation', async () => {
    core.useRules(releasesOnly);
    const event = taskEvent('task.updated', { id: 'tsk_touched', title: 'Release 4' });
    const routine = taskEvent('task.updated', { id: 'tsk_touched_too', title: 'Routine update' });
    const changedAt = core.clock.now().toISOString();
    await core.db.write((m) => m.insert(ResourceProvenanceEntity, [event, routine].map((e) => ({ resourceKey: taskKeyOf(e), depth: 2, actionRunId: 'run-1', ruleId: 'other', changedAt }))));
    await storeTogether(core, [event, routine]);

    expect({ decided, handed: handed.map((e) => e.event_id) }).toEqual({ decided: [], handed: [event.id, routine.id] });
    expect(core.processor.evaluatedAt(handed[0]).evaluated).toBeUndefined();
    // Caused by the engine's own action, the event is not one the rule answers: evaluated as new, it matched.
    for (const claim of handed) await core.processor.process(claim, core.queue.owner);
    expect(await core.event(event.id)).toMatchObject({ status: 'ignored', depth: 3, selfCaused: true });
    expect(await core.event(routine.id)).toMatchObject({ status: 'ignored', depth: 3, selfCaused: true });
  });

  it('decide only an event alone in its batch with its resource, and save its snapshot in the statement that stores it', async () => {
    core.useRules(releasesOnly);
    const alone = [1, 2, 3].map((i) => taskEvent('task.updated', { id: `tsk_alone_${i}`, title: 'Routine update' }));
    const twice = [1, 2].map((i) => taskEvent('task.updated', { id: 'tsk_twice', title: `Routine update ${i}` }));
    await storeTogether(core, [...alone, ...twice]);

    expect(decided.sort()).toEqual(alone.map((e) => e.id).sort());
    for (const event of alone) {
      const stored = await core.event(event.id);
      const snapshot = await core.db.manager.findOneByOrFail(ResourceSnapshotEntity, { resourceKey: taskKeyOf(event) });
      expect({ status: stored.status, seq: Number(snapshot.eventSeq), payload: JSON.parse(snapshot.payload) as unknown }).toEqual({ status: 'ignored', seq: stored.seq, payload: taskOf(event) });
    }
    expect(await core.db.manager.findOneBy(ResourceSnapshotEntity, { resourceKey: 'task:tsk_twice' })).toBeNull();
  });
});
