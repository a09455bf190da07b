/**
 * The event loop's own claim (event-claims.ts), on real databases: on SQLite
 * the claim's transaction also decides the events it takes that need nothing
 * but the database, their first runs leased to the action loop, and leaves the
 * rest (here: one whose condition looks the project up) to the loop, leased;
 * on PostgreSQL it only claims. How many it asks for and when it may ask again.
 */
import { Logger } from '@nestjs/common';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { databasesUnderTest, sqliteUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import { CLAIM_MIN } from './claim-size.js';
import { EventClaims } from './event-claims.js';

const followUp = aRule({ id: 'follow-up', on: 'task.completed', actions: [{ type: 'workflow.trigger', params: { id: 'wf_1', input: { task: '{{ event.data.task.id }}' } } }] });
const looksUp = aRule({
  id: 'looks-up',
  on: 'task.created',
  conditions: { all: [{ fact: 'project', params: { id: 'prj_1' }, path: '$.status', operator: 'equal', value: 'active' }] },
  actions: [{ type: 'workflow.trigger', params: { id: 'wf_2', input: {} } }],
});

beforeAll(() => Logger.overrideLogger(false));

const kinds = await databasesUnderTest('event claims');

describe.each(kinds)('the event loop’s claim on $name', (kind) => {
  let core: Core;
  let claims: EventClaims;
  const sqlite = kind.name === 'sqlite';

  beforeEach(async () => {
    core = await openCore(kind);
    core.useRules(followUp, looksUp);
    claims = new EventClaims(core.db, core.clock, core.queue, core.processor);
  });
  afterEach(() => core.close());

  const handOff = (room = 10) => core.queue.handOff(60_000, room);
  const ids = (events: Array<{ event_id: string }>) => events.map((e) => e.event_id).sort();

  it(sqlite ? 'decides in its transaction what needs nothing but the database, and leaves the rest to the loop, leased' : 'claims the events and leaves every one to the loop, leased', async () => {
    const completed = await core.store(taskEvent('task.completed'));
    const other = await core.store(taskEvent('task.updated'));
    const created = await core.store(taskEvent('task.created'));

    const claimed = await claims.claim(handOff());

    expect(claimed).toMatchObject({ taken: 3, full: false });
    if (!sqlite) {
      expect(claimed.decided).toEqual([]);
      expect(ids(claimed.rest)).toEqual([completed, other, created].sort());
      for (const id of [completed, other, created]) expect(await core.event(id)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner });
      return;
    }
    expect(ids(claimed.decided)).toEqual([completed, other].sort());
    expect(ids(claimed.rest)).toEqual([created]);
    // Nothing but the claim ran: what it decided is committed.
    expect(await core.event(completed)).toMatchObject({ status: 'processed', leaseOwner: null });
    expect(await core.event(other)).toMatchObject({ status: 'ignored', leaseOwner: null });
    expect(await core.event(created)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner, explanation: null });
    const [execution] = await core.executions(completed);
    const [run] = await core.runs(execution!.id);
    expect(run).toMatchObject({ ruleId: 'follow-up', status: 'running', leaseOwner: core.queue.owner });
    expect(claimed.made.map((m) => ({ id: m.run.id, leased: m.leased }))).toEqual([{ id: run!.id, leased: true }]);
  });

  it('waits a moment after a claim that found nothing', async () => {
    expect(claims.pauseMs()).toBeLessThanOrEqual(0);
    expect(await claims.claim(handOff())).toMatchObject({ taken: 0, full: false, decided: [], rest: [], made: [] });
    expect(claims.pauseMs()).toBeGreaterThan(0);
    expect(claims.pauseMs()).toBeLessThanOrEqual(10);
  });

  it(sqlite ? `asks for ${CLAIM_MIN} each time` : `asks for twice as many after a full claim, ${CLAIM_MIN} again after one that was not`, async () => {
    for (let i = 0; i < CLAIM_MIN * 3 + 5; i++) await core.store(taskEvent('task.updated'));
    const taken: Array<{ taken: number; full: boolean }> = [];
    for (let i = 0; i < 3; i++) {
      const { taken: n, full, decided, rest } = await claims.claim(handOff());
      taken.push({ taken: n, full });
      // Claimed on PostgreSQL: the next claim must not take them again.
      if (!sqlite) await core.processor.commitAll(await Promise.all(rest.map((claim) => core.processor.prepare(claim))), core.queue.owner);
      expect(decided.length + rest.length).toBe(n);
    }
    expect(taken).toEqual(
      sqlite
        ? [{ taken: CLAIM_MIN, full: true }, { taken: CLAIM_MIN, full: true }, { taken: CLAIM_MIN, full: true }]
        : [{ taken: CLAIM_MIN, full: true }, { taken: CLAIM_MIN * 2, full: true }, { taken: 5, full: false }],
    );
  });
});

describe('the event loop’s claim on sqlite, with no room or a refusal', () => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(sqliteUnderTest());
    core.useRules(followUp);
  });
  afterEach(() => core.close());
  const claims = () => new EventClaims(core.db, core.clock, core.queue, core.processor);

  it('leaves the first runs of what it decides to the action claim when the action loop has no room', async () => {
    const completed = await core.store(taskEvent('task.completed'));

    const claimed = await claims().claim(core.queue.handOff(60_000, 0));

    expect(claimed.made.map((m) => m.leased)).toEqual([false]);
    const [execution] = await core.executions(completed);
    expect(await core.runs(execution!.id)).toEqual([expect.objectContaining({ status: 'pending', leaseOwner: null })]);
  });

  it('rolls back the decisions and hands every event it took to the loop, still leased', async () => {
    // A real refusal by the database, halfway through: no execution can be inserted.
    await core.db.write((m) => m.query(`CREATE TRIGGER no_follow_ups BEFORE INSERT ON executions BEGIN SELECT RAISE(ABORT, 'refused'); END`));
    const other = await core.store(taskEvent('task.updated'));
    const completed = await core.store(taskEvent('task.completed'));

    const claimed = await claims().claim(core.queue.handOff(60_000, 10));

    expect(claimed).toMatchObject({ taken: 2, decided: [], made: [] });
    expect(claimed.rest.map((e) => e.event_id)).toEqual([other, completed]);
    for (const id of [other, completed]) expect(await core.event(id)).toMatchObject({ status: 'received', leaseOwner: core.queue.owner, explanation: null });
  });
});
