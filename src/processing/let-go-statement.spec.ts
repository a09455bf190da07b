/**
 * PostgreSQL: the events intake leased held behind a create in flight (here:
 * new tasks of the project a rule is creating a task in) keep intake's
 * evaluation, and the commit that records the create's outcome and lets them
 * go stores them decided in its last statement (let-go-statement.ts), with
 * their executions, first runs and snapshots, where what that evaluation
 * assumed is still so: the event loop makes no commit for them. An event
 * about the resource the create made (its provenance written by that same
 * commit) goes to the loop, which evaluates it as the engine's own doing. On
 * a real PostgreSQL database, the core services wired as workers.ts wires them.
 */
import { Logger } from '@nestjs/common';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import { aCreateInFlight, writeUnseen } from '../../test/support/barrier.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import { ExecutionProgress } from './execution-progress.js';
import type { LetGoSent } from './let-go-statement.js';
import { LeasesBeingTaken } from './leases-being-taken.js';
import { OutcomesHandOff } from './outcomes-hand-off.js';
import { ParkedEvents } from './parked-events.js';
import type { ClaimedActionRun, ClaimedEvent } from './work.js';

const creates = aRule({ id: 'creates', actions: [{ id: 'make', type: 'task.create', params: { project_id: 'prj_1', title: 'Made {{ event.id }}' } }] });
const titled = (id: string, title: string, options = {}) =>
  aRule({
    id,
    on: 'task.created',
    options,
    conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'equal', value: title }] },
    actions: [{ type: 'workflow.trigger', params: { id: 'wf_1', input: { task: '{{ event.data.task.id }}' } } }],
  });
const fine = titled('fine', 'Fine');
const throttled = titled('throttled', 'Counted', { throttle: { limit: 5, windowSeconds: 60, key: 'all' } });

const kinds = (await databasesUnderTest('events decided where the outcomes let them go')).filter((kind) => kind.name === 'postgres');

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('events let go by an outcome, decided in its commit on $name', (kind) => {
  let core: Core;
  let progress: ExecutionProgress;
  let parked: ParkedEvents;
  /** What each outcome commit sent to its statement, and what it handed to the loop. */
  let sent: LetGoSent[];
  let rest: ClaimedEvent[];

  beforeEach(async () => {
    core = await openCore(kind);
    core.useRules(creates, fine, throttled);
    parked = new ParkedEvents(250);
    sent = [];
    rest = [];
    progress = new ExecutionProgress(core.metrics, core.db);
    progress.handOffTo<ClaimedEvent>({
      lease: async (sql) => {
        const free = await core.queue.goneOn(sql, parked.all);
        const letGo = await core.processor.sendLetGo(sql, free, core.clock.now().toISOString(), core.queue.handOff(60_000, 10));
        sent.push(letGo);
        return { events: letGo.rest, complete: false };
      },
      take: (events) => rest.push(...events),
    });
  });
  afterEach(() => core.close());

  /** A create in flight in prj_1 (as a run that sends it has its scope), and new tasks of prj_1 held behind it. */
  async function createInFlight(...tasks: Array<[string, string]>): Promise<ClaimedActionRun> {
    const create = await aCreateInFlight(core);
    // Intake's hand-off as workers.ts wires it (its scope then holds parked events).
    core.writer.handOffTo({
      lease: () => core.queue.freshLease(100),
      decider: (sql, events, now) => core.processor.deciderAtIntake(sql, events, now, core.queue.handOff(60_000, 10), (scope) => scope.parent === 'project:prj_1'),
      take: (leased) => void parked.park(leased.map((event) => core.processor.evaluatedAt(event))),
    });
    for (const [id, title] of tasks) await writeUnseen(core.writer, `evt_${id}`, `task:${id}`, { project_id: 'prj_1', title });
    expect(parked.all.map((event) => [event.event_id, event.heldEvaluation?.verdict.status])).toEqual(tasks.map(([id, title]) => [`evt_${id}`, title === 'Other' ? 'ignored' : 'processed']));
    return create;
  }

  /** The create's outcome, recorded: it made `made`. */
  async function created(create: ClaimedActionRun, made = 'tsk_made'): Promise<{ decided: string[]; sent: string[] }> {
    const outcome: AttemptOutcome = { status: 'succeeded', request: JSON.parse(create.request!), responseStatus: 201, response: { id: made }, seconds: 0.01 };
    expect(await progress.record(create, core.queue.owner, outcome, core.clock.now().toISOString())).toBe(true);
    const answered = await sent[sent.length - 1]!.answer;
    return { decided: answered.decided.map((e) => e.event_id), sent: sent[sent.length - 1]!.sent.map((e) => e.event_id) };
  }

  it('stores them decided with their executions, leased first runs and snapshots, and hands the loop nothing', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine'], ['tsk_other', 'Other']);

    expect(await created(create)).toEqual({ decided: ['evt_tsk_fine', 'evt_tsk_other'], sent: ['evt_tsk_fine', 'evt_tsk_other'] });
    expect(rest).toEqual([]);
    expect(await core.event('evt_tsk_fine')).toMatchObject({ status: 'processed', leaseOwner: null, selfCaused: false, depth: 0 });
    expect(await core.event('evt_tsk_other')).toMatchObject({ status: 'ignored', leaseOwner: null });
    const [execution] = await core.executions('evt_tsk_fine');
    const { seq } = await core.event('evt_tsk_fine');
    expect(execution).toMatchObject({ ruleId: 'fine', status: 'running', eventSeq: seq });
    expect(await core.runs(execution!.id)).toEqual([expect.objectContaining({ type: 'workflow.trigger', status: 'running', leaseOwner: core.queue.owner, eventSeq: seq })]);
    expect(await core.explanation('evt_tsk_fine')).toEqual([expect.objectContaining({ rule: 'fine', outcome: 'matched', execution: execution!.id })]);
    const snapshots = await core.db.manager.findBy(ResourceSnapshotEntity, {});
    expect(snapshots.map((s) => s.resourceKey).sort()).toEqual(['task:tsk_fine', 'task:tsk_other', expect.stringMatching(/^task:/)].sort());
    expect(await core.queue.claimEvents(10)).toEqual([]);
  });

  it('stores as the event loop would have: the same columns and explanation as an event it evaluates', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine']);
    await created(create);
    core.writer.handOffTo({ lease: () => undefined, take: () => undefined });
    await writeUnseen(core.writer, 'evt_by_loop', 'task:tsk_loop', { project_id: 'prj_1', title: 'Fine' });
    await core.processNext();

    const columns = async (eventId: string) => {
      const { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil } = await core.event(eventId);
      return { status, depth, selfCaused, error, processedAt, attempts, nextAttemptAt, leaseOwner, leaseUntil };
    };
    expect(await columns('evt_tsk_fine')).toEqual(await columns('evt_by_loop'));
    const explained = async (eventId: string) => (await core.explanation(eventId)).map(({ execution: _id, ...rest }) => rest);
    expect(await explained('evt_tsk_fine')).toEqual(await explained('evt_by_loop'));
  });

  it('leaves to the loop the event about the resource the create made: its provenance, written in the same commit, makes it the engine\'s own', async () => {
    const create = await createInFlight(['tsk_made', 'Fine'], ['tsk_fine', 'Fine']);

    expect(await created(create, 'tsk_made')).toEqual({ decided: ['evt_tsk_fine'], sent: ['evt_tsk_made', 'evt_tsk_fine'] });
    expect(await core.event('evt_tsk_made')).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
    expect(await core.executions('evt_tsk_made')).toEqual([]);
    const [claim] = parked.unpark(parked.all.filter((event) => event.event_id === 'evt_tsk_made'));
    delete claim!.heldEvaluation;
    await core.processor.process(claim!, core.queue.owner);
    // Where intake's evaluation had it matched, the loop's finds it caused by the engine, which rules ignore by default.
    expect(await core.event('evt_tsk_made')).toMatchObject({ status: 'ignored', selfCaused: true, depth: 1 });
    expect(await core.explanation('evt_tsk_made')).toEqual([expect.objectContaining({ rule: 'fine', outcome: 'ignored_self_caused' })]);
  });

  it('leaves to the loop an event whose snapshot, read by its evaluation, was saved meanwhile', async () => {
    core.useRules(aRule({ id: 'from-open', on: 'task.created', conditions: { all: [{ fact: 'changes', path: '$.status.from', operator: 'equal', value: 'open' }] } }));
    const create = await createInFlight(['tsk_fine', 'Fine']);
    await core.db.write((m) => m.insert(ResourceSnapshotEntity, { resourceKey: 'task:tsk_fine', payload: '{"status":"open"}', eventSeq: 0, updatedAt: core.clock.now().toISOString() }));

    expect(await created(create)).toEqual({ decided: [], sent: ['evt_tsk_fine'] });
    expect(await core.event('evt_tsk_fine')).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
  });

  it('hands the loop an event a throttled rule matched (its count is read there), without sending it', async () => {
    const create = await createInFlight(['tsk_counted', 'Counted'], ['tsk_fine', 'Fine']);

    expect(await created(create)).toEqual({ decided: ['evt_tsk_fine'], sent: ['evt_tsk_fine'] });
    expect(rest.map((e) => e.event_id)).toEqual(['evt_tsk_counted']);
  });

  it('marks seen an event about the same resource waiting behind one it decided', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine']);
    await writeUnseen(core.writer, 'evt_fine_again', 'task:tsk_fine', { project_id: 'prj_1', title: 'Fine' });
    expect(await core.event('evt_fine_again')).toMatchObject({ status: 'received', leaseOwner: null, seenResource: false });

    expect((await created(create)).decided).toEqual(['evt_tsk_fine']);
    expect(await core.event('evt_fine_again')).toMatchObject({ status: 'received', seenResource: true });
    expect((await core.queue.claimEvents(10)).map((e) => e.event_id)).toEqual([]);
  });

  it('decides nothing whose lease was lost: another worker holds it now', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine']);
    await core.db.write((m) => m.query(`UPDATE events SET lease_owner = 'someone else' WHERE event_id = 'evt_tsk_fine'`));

    expect(await created(create)).toEqual({ decided: [], sent: ['evt_tsk_fine'] });
    expect(await core.executions('evt_tsk_fine')).toEqual([]);
  });

  it('counts the events it decides as processed or ignored, and the rules they matched', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine'], ['tsk_other', 'Other']);
    await created(create);

    const text = await core.metrics.registry.metrics();
    expect(text).toMatch(/events_processed_total\{[^}]*type="task.created"[^}]*status="processed"[^}]*\} 1/);
    expect(text).toMatch(/events_processed_total\{[^}]*type="task.created"[^}]*status="ignored"[^}]*\} 1/);
    expect(text).toMatch(/rule_matches_total\{[^}]*rule="fine"[^}]*\} 1\n/);
  });
});

describe.each(kinds)('the event loop told after an outcome commit on $name', (kind) => {
  let core: Core;
  let nudged: number;
  let claimedAfter: Set<string>;
  let progress: ExecutionProgress;

  beforeEach(async () => {
    core = await openCore(kind);
    core.useRules(aRule({ id: 'triggers', on: 'task.completed', actions: [{ type: 'workflow.trigger', params: { id: 'wf_1' } }] }));
    nudged = 0;
    claimedAfter = new Set();
    const parked = new ParkedEvents(250);
    progress = new ExecutionProgress(core.metrics, core.db);
    // The workers as OutcomesHandOff sees them (workers.ts wires its own): what it hands over and whom it wakes.
    progress.handOffTo(new OutcomesHandOff('postgres', core.clock, core.queue, core.processor, {
      running: () => true, eventLoopIdle: () => true, parked, handed: [], leasing: new LeasesBeingTaken(core.clock), claimedAfter,
      handOff: () => core.queue.handOff(60_000, 10), startCreated: () => undefined, countEvents: () => undefined,
      handedArrived: () => undefined, nudgeEvents: () => nudged++, claimed: () => undefined,
    }, 8));
  });
  afterEach(() => core.close());

  /** The run of the event just processed about `task`, claimed, and its outcome recorded once `meanwhile` has run. */
  async function runEnds(task: string, meanwhile: () => Promise<unknown> = async () => undefined): Promise<string> {
    await core.store(taskEvent('task.completed', { id: task }));
    await core.processNext();
    const [run] = await core.queue.claimActionRuns(10, 60_000);
    await meanwhile();
    const outcome: AttemptOutcome = { status: 'succeeded', request: JSON.parse(run!.request!), responseStatus: 200, response: {}, seconds: 0.01 };
    expect(await progress.record(run!, core.queue.owner, outcome, core.clock.now().toISOString())).toBe(true);
    await Promise.resolve();
    return run!.id;
  }

  it('wakes the loop when an event about a resource of a run the commit ended waits for a claim', async () => {
    const run = await runEnds('tsk_x', () => core.store(taskEvent('task.completed', { id: 'tsk_x' })));

    expect({ nudged, claimedAfter: [...claimedAfter] }).toEqual({ nudged: 1, claimedAfter: [run] });
    expect((await core.queue.claimEvents(10)).map((e) => e.resource_key)).toEqual(['task:tsk_x']);
  });

  it('does not wake it when nothing waits about those resources, and the run\'s end wakes it no more', async () => {
    const run = await runEnds('tsk_y', () => core.store(taskEvent('task.completed', { id: 'tsk_z' })));
    await core.processNext();

    expect({ nudged, claimedAfter: [...claimedAfter] }).toEqual({ nudged: 0, claimedAfter: [run] });
  });

  it('counts no event leased to another, nor one due later, as waiting for a claim', async () => {
    /** An event about `task` stored meanwhile, then changed as `set` says. */
    const storedWith = (task: string, set: string) => async () => {
      const id = await core.store(taskEvent('task.completed', { id: task }));
      await core.db.write((m) => m.query(`UPDATE events SET ${set} WHERE event_id = $1`, [id]));
    };
    await runEnds('tsk_w', storedWith('tsk_w', "next_attempt_at = '2999-01-01T00:00:00.000Z'"));
    await runEnds('tsk_v', storedWith('tsk_v', "lease_owner = 'someone else', lease_until = '2999-01-01T00:00:00.000Z'"));
    expect(nudged).toBe(0);
    await runEnds('tsk_u', storedWith('tsk_u', "lease_owner = 'someone else', lease_until = '2000-01-01T00:00:00.000Z'"));
    expect(nudged).toBe(1);
  });
});
