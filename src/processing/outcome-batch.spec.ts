/**
 * Outcomes of action runs that finish together are committed together; on
 * PostgreSQL with one statement per step for the whole batch
 * (outcome-batch.ts), on SQLite run by run. Either way each run ends as it
 * would alone: the same rows, on a real database of each kind.
 */
import { Logger } from '@nestjs/common';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { EventEntity } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { writeUnseen } from '../../test/support/barrier.js';
import { aRule } from '../../test/support/rule-factory.js';
import { statementsOf } from '../database/statements.js';
import { ExecutionProgress, loadExecution } from './execution-progress.js';
import type { ClaimedActionRun, ClaimedEvent } from './work.js';

const kinds = await databasesUnderTest('outcomes recorded together');

const single = aRule({ id: 'single', actions: [{ id: 'make', type: 'task.create', params: { project_id: 'prj_1', title: 'Made {{ event.id }}' } }] });
const two = aRule({
  id: 'two',
  actions: [
    { id: 'make', type: 'task.create', params: { project_id: 'prj_1', title: 'First {{ event.id }}' } },
    { type: 'workflow.trigger', params: { id: 'wf_1', input: {} } },
  ],
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('action outcomes committed together on $name', (kind) => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(kind);
    core.useRules(single, two);
  });
  afterEach(() => core.close());

  const run = (id: string) => core.db.manager.findOneByOrFail(ActionRunEntity, { id });
  const executionOf = (claim: ClaimedActionRun) => core.db.manager.findOneByOrFail(ExecutionEntity, { id: claim.execution_id });

  function succeeded(claim: ClaimedActionRun, createdId: string): AttemptOutcome {
    return { status: 'succeeded', request: JSON.parse(claim.request!), responseStatus: 201, response: { id: createdId }, seconds: 0.01 };
  }

  it('ends each run as it would alone: a last action ends its execution, a first one queues the next, a failure fails it, a lost lease changes nothing', async () => {
    await core.store(taskEvent('task.completed', { title: 'One' }));
    await core.store(taskEvent('task.completed', { title: 'Two' }));
    await core.processNext();
    await core.processNext();
    const claims = await core.queue.claimActionRuns(10, 60_000);
    const of = (rule: string, nth: number) => claims.filter((c) => c.rule_id === rule).sort((a, b) => a.event_seq - b.event_seq)[nth]!;
    const [lastOk, firstOk, failing, stolen] = [of('single', 0), of('two', 0), of('single', 1), of('two', 1)];
    await core.db.write((m) => m.update(ActionRunEntity, { id: stolen.id }, { leaseOwner: 'someone else' }));

    const progress = new ExecutionProgress(core.metrics, core.db);
    const now = core.clock.now().toISOString();
    const owner = core.queue.owner;
    // Submitted in one tick: one commit, one batch.
    const recorded = await Promise.all([
      progress.record(lastOk, owner, succeeded(lastOk, 'tsk_made'), now),
      progress.record(firstOk, owner, succeeded(firstOk, 'tsk_first'), now),
      progress.record(failing, owner, { status: 'failed', request: JSON.parse(failing.request!), responseStatus: 422, errorCode: 'http_422', errorMessage: 'no' }, now),
      progress.record(stolen, owner, succeeded(stolen, 'tsk_stolen'), now),
    ]);
    expect(recorded).toEqual([true, true, true, false]);

    expect(await run(lastOk.id)).toMatchObject({ status: 'succeeded', responseStatus: 201, leaseOwner: null, leaseUntil: null });
    expect(await executionOf(lastOk)).toMatchObject({ status: 'succeeded', error: null, finishedAt: now });
    expect(await core.db.manager.findOneByOrFail(ResourceProvenanceEntity, { resourceKey: 'task:tsk_made' })).toMatchObject({ actionRunId: lastOk.id, ruleId: 'single', depth: 0 });
    expect(await core.db.manager.findOneByOrFail(ResourceProvenanceEntity, { resourceKey: 'task:tsk_first' })).toMatchObject({ actionRunId: firstOk.id });

    expect(await executionOf(firstOk)).toMatchObject({ status: 'running', finishedAt: null });
    expect(await core.db.manager.findBy(ActionRunEntity, { executionId: firstOk.execution_id, position: 1 })).toMatchObject([{ status: 'pending', type: 'workflow.trigger' }]);

    expect(await run(failing.id)).toMatchObject({ status: 'failed', errorCode: 'http_422', leaseOwner: null });
    expect(await executionOf(failing)).toMatchObject({ status: 'failed', error: expect.stringContaining('http_422') });
    expect(await core.db.manager.countBy(EventEntity, { type: 'engine.action_run.failed' })).toBe(1);

    expect(await run(stolen.id)).toMatchObject({ status: 'running', leaseOwner: 'someone else', response: null });
    expect(await core.db.manager.findOneBy(ResourceProvenanceEntity, { resourceKey: 'task:tsk_stolen' })).toBeNull();
    expect(await executionOf(stolen)).toMatchObject({ status: 'running' });
  });

  it('keeps the request a run holds: an outcome brings one only when its attempt rendered it anew', async () => {
    await core.store(taskEvent('task.completed', { title: 'One' }));
    await core.store(taskEvent('task.completed', { title: 'Two' }));
    await core.store(taskEvent('task.completed', { title: 'Three' }));
    for (let i = 0; i < 3; i++) await core.processNext();
    const [crashed, sent, alone] = (await core.queue.claimActionRuns(10, 60_000)).filter((c) => c.rule_id === 'single').sort((a, b) => a.event_seq - b.event_seq);
    const stored = (claim: ClaimedActionRun) => JSON.parse(claim.request!) as unknown;
    expect(stored(crashed)).toMatchObject({ body: { title: expect.stringContaining('Made') } });

    const progress = new ExecutionProgress(core.metrics, core.db);
    const now = core.clock.now().toISOString();
    const owner = core.queue.owner;
    // An attempt that threw before its request went out brings none (action-runner.ts recordCrash); one that sent the
    // stored request names it as stored (requestJson), in a batch and alone.
    await Promise.all([
      progress.record(crashed, owner, { status: 'failed', errorCode: 'engine_error', errorMessage: 'boom' }, now),
      progress.record(sent, owner, { ...succeeded(sent, 'tsk_sent'), requestJson: sent.request! }, now),
    ]);
    await progress.record(alone, owner, { status: 'failed', errorCode: 'engine_error', errorMessage: 'boom' }, now);

    for (const claim of [crashed, sent, alone]) expect(JSON.parse((await run(claim.id)).request!)).toEqual(stored(claim));
    expect(await run(crashed.id)).toMatchObject({ status: 'failed', errorCode: 'engine_error' });
    expect(await run(sent.id)).toMatchObject({ status: 'succeeded', responseStatus: 201 });
  });

  it("stores the service's answer as it came when it was JSON, and writes out one that came otherwise, in a batch and alone", async () => {
    for (const title of ['One', 'Two', 'Three']) await core.store(taskEvent('task.completed', { title }));
    for (let i = 0; i < 3; i++) await core.processNext();
    const [asSent, parsedOnly, alone] = (await core.queue.claimActionRuns(10, 60_000)).filter((c) => c.rule_id === 'single').sort((a, b) => a.event_seq - b.event_seq);
    const progress = new ExecutionProgress(core.metrics, core.db);
    const now = core.clock.now().toISOString();
    const owner = core.queue.owner;
    const text = (id: string) => `{ "id": "${id}",\n  "title": "as sent" }`;
    await Promise.all([
      progress.record(asSent, owner, { ...succeeded(asSent, 'tsk_as_sent'), responseJson: text('tsk_as_sent') }, now),
      progress.record(parsedOnly, owner, succeeded(parsedOnly, 'tsk_parsed'), now),
    ]);
    await progress.record(alone, owner, { ...succeeded(alone, 'tsk_alone'), responseJson: text('tsk_alone') }, now);
    expect((await run(asSent.id)).response).toBe(text('tsk_as_sent'));
    expect((await run(parsedOnly.id)).response).toBe(JSON.stringify({ id: 'tsk_parsed' }));
    expect((await run(alone.id)).response).toBe(text('tsk_alone'));
  });

  it("records a touched resource at its event's depth: from the execution in hand, else from the event", async () => {
    await core.store(taskEvent('task.completed', { title: 'One' }));
    await core.store(taskEvent('task.completed', { title: 'Two' }));
    await core.processNext();
    await core.processNext();
    const [inHand, read] = (await core.queue.claimActionRuns(10, 60_000)).filter((c) => c.rule_id === 'single').sort((a, b) => a.event_seq - b.event_seq);
    // Depths no event here would reach by itself: each comes from where it was told to.
    await core.db.write((m) => m.update(EventEntity, { seq: read.event_seq }, { depth: 2 }));
    const loaded = { ...(await loadExecution(statementsOf(core.db.manager), inHand)), eventDepth: 3 };

    const progress = new ExecutionProgress(core.metrics, core.db);
    const now = core.clock.now().toISOString();
    await Promise.all([
      progress.record(inHand, core.queue.owner, succeeded(inHand, 'tsk_in_hand'), now, loaded),
      progress.record(read, core.queue.owner, succeeded(read, 'tsk_read'), now),
    ]);
    const depth = async (resourceKey: string) => (await core.db.manager.findOneByOrFail(ResourceProvenanceEntity, { resourceKey })).depth;
    expect(await depth('task:tsk_in_hand')).toBe(3);
    expect(await depth('task:tsk_read')).toBe(2);
  });

  it('claims, in the commit that records them, the events the outcomes let go, and nothing when none was recorded', async () => {
    await core.store(taskEvent('task.completed', { title: 'Four' }));
    await core.processNext();
    const [create, other] = (await core.queue.claimActionRuns(10, 60_000)).filter((c) => c.rule_id === 'single');
    expect(other).toBeUndefined();
    // Its scope, as a run that sends its create gets (dry-run here sends nothing and records none).
    await core.db.write((m) => m.update(ActionRunEntity, { id: create!.id }, { scopeKind: 'task', scopeParent: 'project:prj_1' }));
    core.clock.advance(1);
    // A task created in the project while the create is in flight: it waits behind the causal barrier.
    await writeUnseen(core.writer, 'evt_new_task', 'task:tsk_new', { project_id: 'prj_1' });
    expect(await core.queue.claimEvents(10)).toEqual([]);

    const progress = new ExecutionProgress(core.metrics, core.db);
    const taken: Array<{ events: string[]; complete: boolean; runs: string[] }> = [];
    progress.handOffTo<ClaimedEvent>({
      lease: async (sql) => {
        const events = await core.queue.claimEventsIn(sql, 10);
        return { events, complete: events.length < 10 };
      },
      take: (events, complete, runs) => taken.push({ events: events.map((e) => e.event_id), complete, runs }),
    });
    const now = core.clock.now().toISOString();
    await core.db.write((m) => m.update(ActionRunEntity, { id: create!.id }, { leaseOwner: 'someone else' }));
    expect(await progress.record(create!, core.queue.owner, succeeded(create!, 'tsk_made'), now)).toBe(false);
    expect(taken).toEqual([]);

    await core.db.write((m) => m.update(ActionRunEntity, { id: create!.id }, { leaseOwner: core.queue.owner }));
    expect(await progress.record(create!, core.queue.owner, succeeded(create!, 'tsk_made'), now)).toBe(true);
    expect(taken).toEqual([{ events: ['evt_new_task'], complete: true, runs: [create!.id] }]);
    expect(await core.db.manager.findOneByOrFail(EventEntity, { eventId: 'evt_new_task' })).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
  });

  it('ends an execution whose earlier action failed (continueOnError) as failed, counting its failures', async () => {
    core.useRules(aRule({
      id: 'carry-on',
      actions: [
        { id: 'first', type: 'task.create', params: { project_id: 'prj_1', title: 'First' }, continueOnError: true },
        { id: 'second', type: 'task.create', params: { project_id: 'prj_1', title: 'Second' } },
      ],
    }));
    await core.store(taskEvent('task.completed', { title: 'Three' }));
    await core.processNext();
    const progress = new ExecutionProgress(core.metrics, core.db);
    const owner = core.queue.owner;
    const now = core.clock.now().toISOString();
    const claimed = await core.queue.claimActionRuns(10, 60_000);
    await progress.record(claimed.find((c) => c.rule_id === 'carry-on')!, owner, { status: 'failed', errorCode: 'http_422', errorMessage: 'no' }, now);
    // The second action, with another rule's run (still leased to us) finishing beside it, so that the batch has two.
    const [second] = await core.queue.claimActionRuns(10, 60_000);
    const other = claimed.find((c) => c.rule_id === 'single')!;
    await Promise.all([
      progress.record(second, owner, { status: 'succeeded', request: JSON.parse(second.request ?? 'null') ?? undefined, responseStatus: 201, response: { id: 'tsk_second' } }, now),
      progress.record(other, owner, { status: 'succeeded', responseStatus: 201, response: {} }, now),
    ]);
    expect(await executionOf(second)).toMatchObject({ status: 'failed', error: '1 action(s) failed', finishedAt: now });
  });
});
