import { randomUUID } from 'node:crypto';
import type { Database } from '../database/database.service.js';
import { EventEntity, type EventStatus } from '../database/event.entity.js';
import type { Lookups } from '../rules/facts.js';
import type { RuleAction, TopLevelCondition } from '../rules/rule.types.js';
import { databasesUnderTest, type TestDatabase } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import { openDatabase } from '../../test/support/storage.js';
import { runBacktest } from './backtest.js';

const kinds = await databasesUnderTest('backtest');

const NOW = new Date('2026-03-02T10:00:00.000Z');
const noLookups: Lookups = {
  project: () => Promise.reject(new Error('no lookups here')),
  user: () => Promise.reject(new Error('no lookups here')),
  tasks: () => Promise.reject(new Error('no lookups here')),
};

const echoOnly = aRule({ id: 'echo-only', on: 'task.completed' });
const selfTriggered = aRule({ id: 'self-triggered', on: 'task.completed', options: { allowSelfTriggered: true } });

describe.each(kinds)('runBacktest on $name: loop protection as the live engine applies it', (kind) => {
  let testDb: TestDatabase;
  let db: Database;

  beforeEach(async () => {
    testDb = await kind.create();
    db = await openDatabase(testDb.url);
  });

  afterEach(async () => {
    await db.dataSource.destroy();
    await testDb.drop();
  });

  async function stored(status: EventStatus, selfCaused: boolean): Promise<string> {
    const eventId = `evt_${randomUUID()}`;
    const payload = { id: eventId, type: 'task.completed', data: { task: { id: 'tsk_1', project_id: 'prj_1' } } };
    await db.write((m) =>
      m.insert(EventEntity, {
        eventId, type: 'task.completed', resourceKey: 'task:tsk_1', status, source: 'webhook', payload: JSON.stringify(payload),
        depth: selfCaused ? 1 : 0, selfCaused, receivedAt: NOW.toISOString(), attempts: 0, nextAttemptAt: NOW.toISOString(),
      }),
    );
    return eventId;
  }

  async function backtest(rules = [echoOnly, selfTriggered]) {
    const report = await runBacktest(db.manager, rules, {}, { lookups: () => noLookups, now: NOW });
    return report.events[0];
  }

  it('evaluates an outside event with every listening rule', async () => {
    await stored('processed', false);
    const event = await backtest();
    expect(event.would_match.map((m) => m.rule).sort()).toEqual(['echo-only', 'self-triggered']);
    expect(event.ignored).toBeUndefined();
  });

  it('ignores a self-caused event for rules that do not allow self-triggering, as the live engine does', async () => {
    await stored('processed', true);
    const event = await backtest();
    expect(event.would_match.map((m) => m.rule)).toEqual(['self-triggered']);
    expect(event.ignored).toEqual([{ rule: 'echo-only', reason: 'self_caused' }]);
    expect(event.differences.newly_matched).toEqual(['self-triggered']);
  });

  it('evaluates no rule for a loop-blocked event', async () => {
    await stored('loop_blocked', true);
    const event = await backtest();
    expect(event.would_match).toEqual([]);
    expect(event.ignored).toEqual([
      { rule: 'echo-only', reason: 'loop_blocked' },
      { rule: 'self-triggered', reason: 'loop_blocked' },
    ]);
  });
});

/** A check step has no params (the schema refuses them); the shared type still declares them. */
const checkStep = (conditions: TopLevelCondition) => ({ type: 'check', conditions }) as Partial<RuleAction> as RuleAction;

describe.each(kinds)('runBacktest on $name: delays, checks and forEach items (SPEC 11)', (kind) => {
  let testDb: TestDatabase;
  let db: Database;

  beforeEach(async () => {
    testDb = await kind.create();
    db = await openDatabase(testDb.url);
    const payload = { id: 'evt_arch', type: 'project.archived', data: { project: { id: 'prj_1' } } };
    await db.write((m) =>
      m.insert(EventEntity, {
        eventId: 'evt_arch', type: 'project.archived', resourceKey: 'project:prj_1', status: 'processed', source: 'webhook',
        payload: JSON.stringify(payload), depth: 0, selfCaused: false, receivedAt: NOW.toISOString(), attempts: 0, nextAttemptAt: NOW.toISOString(),
      }),
    );
  });

  afterEach(async () => {
    await db.dataSource.destroy();
    await testDb.drop();
  });

  const tasksNow: Lookups = { ...noLookups, tasks: async () => [{ id: 'tsk_1', status: 'open' }, { id: 'tsk_2', status: 'completed' }, { id: 'tsk_3', status: 'open' }] };
  const openTasks = { fact: 'tasks', params: { project_id: '{{ event.data.project.id }}' }, path: "$[?(@.status != 'completed')]" };
  const rule = aRule({
    id: 'close-open-tasks',
    on: 'project.archived',
    actions: [
      { type: 'delay', params: { duration: 'PT15M' } },
      checkStep({ all: [{ fact: 'tasks', params: { project_id: 'prj_1' }, operator: 'isNotEmpty', value: true }] }),
      { type: 'task.update', forEach: openTasks, params: { id: '{{ item.id }}', status: 'completed' } },
    ],
  });

  it('shows the delay as its duration, the check as evaluated with the lookups of now, and one request per item', async () => {
    const report = await runBacktest(db.manager, [rule], {}, { lookups: () => tasksNow, now: NOW });
    const [delay, check, update] = report.events[0].would_match[0].actions;
    expect(delay).toEqual({ type: 'delay', delay: { duration: 'PT15M', ms: 900_000 } });
    expect(check.check).toMatchObject({ passed: true, conditions: [{ fact: 'tasks', result: true }] });
    expect(update.items?.map((item) => item.request?.path)).toEqual(['/tasks/tsk_1', '/tasks/tsk_3']);
  });

  it('shows too_many_items when the set is larger than MAX_FOREACH_ITEMS', async () => {
    const report = await runBacktest(db.manager, [rule], {}, { lookups: () => tasksNow, now: NOW, maxForEachItems: 1 });
    const update = report.events[0].would_match[0].actions[2];
    expect(update).toEqual({ type: 'task.update', error: { code: 'too_many_items', message: 'forEach: 2 items, more than MAX_FOREACH_ITEMS (1)' } });
  });
});
