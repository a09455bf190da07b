/**
 * SQLite: the events a commit of action outcomes lets go (here: new tasks held
 * behind a create in flight in their project) are decided in that commit
 * (EventProcessor.decideLetGo, wired as workers.ts wires it): evaluated, stored
 * finished with their executions and first runs, leased to the action loop, so
 * the event loop makes no commit of its own for them. What needs a lookup goes
 * to the loop, still leased; what throws is rolled back to before the first of
 * them, and the outcomes stay recorded. On a real SQLite database.
 */
import { Logger } from '@nestjs/common';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { statementsOf } from '../database/statements.js';
import { aCreateInFlight, writeUnseen } from '../../test/support/barrier.js';
import { openCore, type Core } from '../../test/support/core.js';
import { sqliteUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import type { Condition } from '../rules/rule.types.js';
import type { LetGoDecided } from './event-processor.js';
import { ExecutionProgress } from './execution-progress.js';
import type { ClaimedActionRun, ClaimedEvent } from './work.js';

const creates = aRule({ id: 'creates', actions: [{ id: 'make', type: 'task.create', params: { project_id: 'prj_1', title: 'Made {{ event.id }}' } }] });
const titled = (id: string, title: string, conditions: Condition[] = []) =>
  aRule({
    id,
    on: 'task.created',
    conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'equal', value: title }, ...conditions] },
    actions: [{ type: 'workflow.trigger', params: { id: 'wf_1', input: { task: '{{ event.data.task.id }}' } } }],
  });
const fine = titled('fine', 'Fine');
const explodes = titled('explodes', 'Boom');
const looksUp = titled('looks-up', 'Look', [{ fact: 'project', params: { id: 'prj_1' }, path: '$.status', operator: 'equal', value: 'active' }]);

beforeAll(() => Logger.overrideLogger(false));

describe('events decided in the commit of the outcomes that let them go (SQLite)', () => {
  let core: Core;
  let progress: ExecutionProgress;
  let decided: LetGoDecided[];
  let handed: Array<{ events: string[]; runs: string[] }>;

  beforeEach(async () => {
    core = await openCore(sqliteUnderTest());
    core.useRules(creates, fine, explodes, looksUp);
    decided = [];
    handed = [];
    progress = new ExecutionProgress(core.metrics, core.db);
    progress.handOffTo<ClaimedEvent>({
      lease: async (sql) => {
        const events = await core.queue.claimEventsIn(sql, 10);
        const letGo = await core.processor.decideLetGo(sql, events, core.clock.now().toISOString(), core.queue.handOff(60_000, 10));
        decided.push(letGo);
        return { events: letGo.rest, complete: events.length < 10 };
      },
      take: (events, _complete, runs) => handed.push({ events: events.map((e) => e.event_id), runs }),
    });
  });
  afterEach(() => core.close());

  /** A create in flight in prj_1 (as a run that sends it has its scope), and new tasks of prj_1 held behind it. */
  async function createInFlight(...tasks: Array<[string, string]>): Promise<ClaimedActionRun> {
    const create = await aCreateInFlight(core);
    for (const [id, title] of tasks) await writeUnseen(core.writer, `evt_${id}`, `task:${id}`, { project_id: 'prj_1', title });
    expect(await core.queue.claimEvents(10)).toEqual([]);
    return create;
  }

  const succeeded = (claim: ClaimedActionRun): AttemptOutcome => ({
    status: 'succeeded', request: JSON.parse(claim.request!), responseStatus: 201, response: { id: 'tsk_made' }, seconds: 0.01,
  });
  const record = (create: ClaimedActionRun) => progress.record(create, core.queue.owner, succeeded(create), core.clock.now().toISOString());
  const runsOf = async (eventId: string) => (await Promise.all((await core.executions(eventId)).map((x) => core.runs(x.id)))).flat();

  it('stores them finished, with their executions and first runs leased to the action loop, in that commit', async () => {
    const create = await createInFlight(['tsk_fine', 'Fine'], ['tsk_other', 'Other']);
    expect(await record(create)).toBe(true);

    expect(decided).toHaveLength(1);
    expect(decided[0]!.decided.map((e) => e.event_id).sort()).toEqual(['evt_tsk_fine', 'evt_tsk_other']);
    expect(decided[0]!.rest).toEqual([]);
    expect(handed).toEqual([{ events: [], runs: [create.id] }]);
    expect(await core.event('evt_tsk_fine')).toMatchObject({ status: 'processed', leaseOwner: null });
    expect(await core.event('evt_tsk_other')).toMatchObject({ status: 'ignored', leaseOwner: null });
    const [run] = await runsOf('evt_tsk_fine');
    expect(run).toMatchObject({ ruleId: 'fine', type: 'workflow.trigger', status: 'running', leaseOwner: core.queue.owner });
    expect(decided[0]!.made.map((m) => ({ id: m.run.id, leased: m.leased }))).toEqual([{ id: run!.id, leased: true }]);
    expect(await core.run(create.id)).toMatchObject({ status: 'succeeded' });
  });

  it('leaves an event whose evaluation asks for a lookup to the event loop, leased, and decides the others', async () => {
    const create = await createInFlight(['tsk_look', 'Look'], ['tsk_fine', 'Fine']);
    expect(await record(create)).toBe(true);

    expect(decided[0]!.decided.map((e) => e.event_id)).toEqual(['evt_tsk_fine']);
    expect(handed).toEqual([{ events: ['evt_tsk_look'], runs: [create.id] }]);
    expect(await core.event('evt_tsk_look')).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
    expect(await core.executions('evt_tsk_look')).toEqual([]);
    expect(await core.event('evt_tsk_fine')).toMatchObject({ status: 'processed' });
  });

  it('rolls back what it wrote of them when one throws, and hands them all to the event loop; the outcome stays recorded', async () => {
    // A real refusal by the database, halfway through: the executions of `explodes` cannot be inserted.
    await core.db.write((m) => m.query(`CREATE TRIGGER no_explosions BEFORE INSERT ON executions WHEN NEW.rule_id = 'explodes'
      BEGIN SELECT RAISE(ABORT, 'explosions refused'); END`));
    const create = await createInFlight(['tsk_fine', 'Fine'], ['tsk_boom', 'Boom']);
    expect(await record(create)).toBe(true);

    expect(decided[0]!.decided).toEqual([]);
    expect(handed).toEqual([{ events: ['evt_tsk_fine', 'evt_tsk_boom'], runs: [create.id] }]);
    for (const id of ['evt_tsk_fine', 'evt_tsk_boom']) {
      expect(await core.event(id)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner, explanation: null });
      expect(await core.executions(id)).toEqual([]);
    }
    expect(await core.run(create.id)).toMatchObject({ status: 'succeeded' });
    // Still inside one transaction of its own on the connection: none is left open.
    expect(await statementsOf(core.db.manager).rows('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });
});
