import type { RuleEvent } from './facts.js';
import { equalityConditionOf, RuleIndex, triggerMatches } from './rule-index.js';
import type { LoadedRule, RuleDefinition } from './rule.types.js';
import { aRule } from '../../test/support/rule-factory.js';

function anEvent(overrides: Partial<RuleEvent> = {}): RuleEvent {
  return { type: 'task.completed', data: { task: { id: 'tsk_1', project_id: 'prj_1', status: 'completed' } }, ...overrides };
}

function inProject(projectId: unknown) {
  return { fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: projectId };
}

const ids = (rules: readonly LoadedRule[]) => rules.map((rule) => rule.id);

describe(RuleIndex.name, () => {
  describe('trigger patterns', () => {
    it.each([
      ['task.completed', 'task.completed', true],
      ['task.completed', 'task.created', false],
      ['task.*', 'task.completed', true],
      ['task.*', 'task.run.completed', false],
      ['task.*', 'task', false],
      ['*.created', 'project.created', true],
      ['workflow.*.completed', 'workflow.run.completed', true],
      ['*', 'ping', true],
      ['*', 'task.completed', false],
      ['task', 'task.completed', false],
    ])('%s listens to %s: %p', (pattern, type, expected) => {
      expect(triggerMatches(pattern, type)).toBe(expected);
      const index = new RuleIndex([aRule({ on: pattern })]);
      expect(ids(index.candidates(anEvent({ type })).evaluate)).toEqual(expected ? ['rule-1'] : []);
    });

    it('lists a rule once even when several of its triggers match', () => {
      const index = new RuleIndex([aRule({ on: ['task.*', 'task.completed', '*.completed'] })]);
      expect(ids(index.candidates(anEvent()).evaluate)).toEqual(['rule-1']);
    });

    it('indexes only enabled rules with triggers; a cron rule listens to schedule.fired', () => {
      const index = new RuleIndex([
        aRule({ id: 'off', enabled: false }),
        aRule({ id: 'on' }),
        aRule({ id: 'cron', on: undefined, schedule: { cron: '0 9 * * 1' } }),
      ]);
      expect(ids(index.rules)).toEqual(['cron', 'on']);
      expect(ids(index.candidates(anEvent()).evaluate)).toEqual(['on']);
    });
  });

  describe('order', () => {
    it('puts higher priorities first, then ids in order', () => {
      const index = new RuleIndex([
        aRule({ id: 'b', priority: 5 }),
        aRule({ id: 'c', priority: 1, on: 'task.*' }),
        aRule({ id: 'a', priority: 5, on: '*.completed' }),
        aRule({ id: 'd', priority: 10 }),
      ]);
      expect(ids(index.candidates(anEvent()).evaluate)).toEqual(['d', 'a', 'b', 'c']);
    });
  });

  describe('type cache', () => {
    it('answers a repeated type from the cache, with the same list', () => {
      const index = new RuleIndex([aRule({ id: 'x', on: 'task.*' }), aRule({ id: 'y', on: 'project.created' })]);
      const first = index.candidates(anEvent());
      const second = index.candidates(anEvent({ data: { other: true } }));
      expect(second.evaluate).toBe(first.evaluate);
      expect(ids(index.candidates(anEvent({ type: 'project.created' })).evaluate)).toEqual(['y']);
    });

    it('answers an unknown type with no rules', () => {
      const index = new RuleIndex([aRule()]);
      expect(index.candidates(anEvent({ type: 'nobody.listens' }))).toEqual({ evaluate: [], excluded: [] });
    });
  });

  describe('equality pre-filter', () => {
    const rules = [
      aRule({ id: 'prj-1', conditions: { all: [inProject('prj_1')] } }),
      aRule({ id: 'prj-2', priority: 3, conditions: { all: [inProject('prj_2'), { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^R' }] } }),
      aRule({ id: 'any-project', conditions: { all: [{ fact: 'event', path: '$.data.task.status', operator: 'notEqual', value: 'open' }] } }),
      aRule({ id: 'no-conditions' }),
    ];

    it('evaluates the rule filed under the event value and the rules without such a condition', () => {
      const index = new RuleIndex(rules);
      expect(ids(index.candidates(anEvent()).evaluate)).toEqual(['any-project', 'no-conditions', 'prj-1']);
      const other = anEvent({ data: { task: { project_id: 'prj_2' } } });
      expect(ids(index.candidates(other).evaluate)).toEqual(['prj-2', 'any-project', 'no-conditions']);
    });

    it('leaves out the rules filed under other values, explaining them only when asked', () => {
      const index = new RuleIndex(rules);
      expect(index.candidates(anEvent()).excluded).toEqual([]);
      const { excluded } = index.candidates(anEvent(), { explainExcluded: true });
      expect(excluded).toEqual([
        { rule: rules[1], condition: inProject('prj_2'), factValue: 'prj_1' },
      ]);
    });

    it('treats a missing value as matching none of the filed values', () => {
      const index = new RuleIndex(rules);
      const { evaluate, excluded } = index.candidates(anEvent({ data: {} }), { explainExcluded: true });
      expect(ids(evaluate)).toEqual(['any-project', 'no-conditions']);
      expect(excluded.map((entry) => [entry.rule.id, entry.factValue])).toEqual([['prj-2', undefined], ['prj-1', undefined]]);
    });

    it('compares like the equal operator: 1 is not "1"', () => {
      const index = new RuleIndex([aRule({ id: 'one', conditions: { all: [inProject(1)] } })]);
      expect(ids(index.candidates(anEvent({ data: { task: { project_id: '1' } } })).evaluate)).toEqual([]);
      expect(ids(index.candidates(anEvent({ data: { task: { project_id: 1 } } })).evaluate)).toEqual(['one']);
    });

    it('files one rule per distinct path, reading each path once', () => {
      const byUser = { fact: 'event', path: '$.data.task.assignee_id', operator: 'equal', value: 'usr_1' };
      const index = new RuleIndex([aRule({ id: 'mine', conditions: { all: [byUser] } }), ...rules]);
      const event = anEvent({ data: { task: { project_id: 'prj_1', assignee_id: 'usr_1' } } });
      expect(ids(index.candidates(event).evaluate)).toEqual(['any-project', 'mine', 'no-conditions', 'prj-1']);
    });

    it('files a cron rule under its own rule id, so a tick fires only that rule', () => {
      const cron = (id: string) => aRule({ id, on: undefined, schedule: { cron: '* * * * *' } });
      const index = new RuleIndex([cron('daily'), cron('hourly')]);
      const tick = anEvent({ type: 'schedule.fired', data: { rule_id: 'hourly', scheduled_for: '2024-05-06T10:00:00Z' } });
      expect(ids(index.candidates(tick).evaluate)).toEqual(['hourly']);
    });

    it.each([
      ['under any', { any: [inProject('prj_1')] }],
      ['under not', { not: inProject('prj_1') }],
      ['nested in an all', { all: [{ all: [inProject('prj_1')] }] }],
      ['with another operator', { all: [{ ...inProject('prj_1'), operator: 'notEqual' }] }],
      ['on another fact', { all: [{ ...inProject('prj_1'), fact: 'changes' }] }],
      ['with a template value', { all: [inProject('{{ event.data.x }}')] }],
      ['with an object value', { all: [inProject({ fact: 'event' })] }],
      ['with a JSONPath query', { all: [{ ...inProject('prj_1'), path: '$..project_id' }] }],
    ])('does not pre-filter on a condition %s', (_name, conditions) => {
      expect(equalityConditionOf(aRule({ conditions: conditions as RuleDefinition['conditions'] }))).toBeNull();
    });
  });
});
