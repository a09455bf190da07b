import { EventFacts, type Lookups, type RuleEvent } from './facts.js';
import * as fc from 'fast-check';
import { evaluateCandidates, evaluateCandidatesNow, evaluateCheck, evaluatedLocally, evaluateEvent, evaluateRule } from './rule-evaluator.js';
import { RuleIndex } from './rule-index.js';
import type { ConditionLeaf, TopLevelCondition } from './rule.types.js';
import { aRule } from '../../test/support/rule-factory.js';

function anEvent(task: Record<string, unknown> = {}, overrides: Partial<RuleEvent> = {}): RuleEvent {
  const defaults = { id: 'tsk_1', project_id: 'prj_1', title: 'Release 1.2', status: 'completed', assignee_id: 'usr_1' };
  return { type: 'task.completed', data: { task: { ...defaults, ...task } }, ...overrides };
}

/** An in-memory stand-in for the service, counting calls: the boundary to a remote service. */
function fakeLookups(options: { failWith?: Error } = {}): Lookups & { calls: string[] } {
  const calls: string[] = [];
  const answer = <T>(call: string, value: T): Promise<T> => {
    calls.push(call);
    return options.failWith ? Promise.reject(options.failWith) : Promise.resolve(value);
  };
  return {
    calls,
    project: (id) => answer(`project:${id}`, { id, status: 'active' }),
    user: (id) => answer(`user:${id}`, { id, role: 'admin' }),
    tasks: (projectId) => answer(`tasks:${projectId}`, [{ id: 'tsk_1' }, { id: 'tsk_2' }]),
  };
}

function factsFor(event: RuleEvent, lookups: Lookups = fakeLookups()): EventFacts {
  return new EventFacts(event, { now: new Date('2024-05-06T10:00:00Z'), lookups });
}

const onEvent = (path: string, operator: string, value: unknown): ConditionLeaf => ({ fact: 'event', path: `$.data.task.${path}`, operator, value });
const projectIs = (status: string): ConditionLeaf => ({
  fact: 'project', params: { id: '{{ event.data.task.project_id }}' }, path: '$.status', operator: 'equal', value: status,
});
const when = (conditions: TopLevelCondition) => aRule({ conditions });

describe(evaluateRule.name, () => {
  describe('outcome', () => {
    it('matches every event it listens to when the rule has no conditions', async () => {
      const evaluation = await evaluateRule(aRule(), factsFor(anEvent()));
      expect(evaluation).toEqual({ ruleId: 'rule-1', ruleVersion: aRule().version, matched: true, conditions: [] });
    });

    it('records each condition of nested all/any/not with its place, fact value and result', async () => {
      const rule = when({
        all: [
          onEvent('project_id', 'equal', 'prj_1'),
          { any: [onEvent('title', 'matches', '^Hotfix'), onEvent('title', 'startsWith', 'Release')] },
          { not: onEvent('status', 'equal', 'open') },
        ],
      });
      const evaluation = await evaluateRule(rule, factsFor(anEvent()));
      expect(evaluation.matched).toBe(true);
      expect(evaluation.conditions).toEqual([
        { fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1', factValue: 'prj_1', result: true, group: 'all[0]' },
        { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Hotfix', factValue: 'Release 1.2', result: false, group: 'all[1].any[0]' },
        { fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Release', factValue: 'Release 1.2', result: true, group: 'all[1].any[1]' },
        { fact: 'event', path: '$.data.task.status', operator: 'equal', value: 'open', factValue: 'completed', result: false, group: 'all[2].not' },
      ]);
    });

    it('says which condition failed when the rule does not match', async () => {
      const rule = when({ all: [onEvent('project_id', 'equal', 'prj_1'), onEvent('assignee_id', 'isEmpty', true)] });
      const evaluation = await evaluateRule(rule, factsFor(anEvent()));
      expect(evaluation.matched).toBe(false);
      expect(evaluation.conditions.map(({ group, factValue, result }) => ({ group, factValue, result }))).toEqual([
        { group: 'all[0]', factValue: 'prj_1', result: true },
        { group: 'all[1]', factValue: 'usr_1', result: false },
      ]);
    });

    it('resolves a value that refers to another fact', async () => {
      const rule = when({ all: [{ ...onEvent('assignee_id', 'equal', null), value: { fact: 'event', path: '$.data.task.reporter_id' } }] });
      const evaluation = await evaluateRule(rule, factsFor(anEvent({ reporter_id: 'usr_1' })));
      expect(evaluation.matched).toBe(true);
      expect(evaluation.conditions[0]).toMatchObject({ value: 'usr_1', factValue: 'usr_1' });
    });

    it('gives every concurrent evaluation of one rule its own result', async () => {
      const rule = when({ all: [onEvent('project_id', 'equal', 'prj_1')] });
      const projects = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? 'prj_1' : 'prj_2'));
      const evaluations = await Promise.all(projects.map((project_id) => evaluateRule(rule, factsFor(anEvent({ project_id })))));
      expect(evaluations.map((evaluation) => evaluation.conditions.length)).toEqual(projects.map(() => 1));
      expect(evaluations.map((evaluation) => evaluation.matched)).toEqual(projects.map((project) => project === 'prj_1'));
    });
  });

  describe('facts', () => {
    it('reads now in the rule’s own time zone', async () => {
      const atNoon = { all: [{ fact: 'now', path: '$.hour', operator: 'equal', value: 12 }] };
      const berlin = aRule({ on: undefined, schedule: { cron: '0 * * * *', timezone: 'Europe/Berlin' }, conditions: atNoon });
      const utc = aRule({ on: undefined, schedule: { cron: '0 * * * *' }, conditions: atNoon });
      const facts = factsFor(anEvent());
      expect((await evaluateRule(berlin, facts)).matched).toBe(true);
      expect((await evaluateRule(utc, facts)).conditions[0]).toMatchObject({ factValue: 10, result: false });
    });

    it('reads the changes of the event’s resource', async () => {
      const rule = when({ all: [{ fact: 'changes', path: '$.status.to', operator: 'equal', value: 'completed' }] });
      const event = anEvent({}, { data: { task: {}, changes: { status: { from: 'open', to: 'completed' } } } });
      expect((await evaluateRule(rule, factsFor(event))).matched).toBe(true);
    });

    it('renders template params and looks the resource up', async () => {
      const lookups = fakeLookups();
      const evaluation = await evaluateRule(when({ all: [projectIs('active')] }), factsFor(anEvent(), lookups));
      expect(evaluation.matched).toBe(true);
      expect(evaluation.conditions[0]).toMatchObject({ params: { id: '{{ event.data.task.project_id }}' }, factValue: 'active' });
      expect(lookups.calls).toEqual(['project:prj_1']);
    });
  });

  describe('failures', () => {
    it('does not match when a lookup fails, and says why', async () => {
      const lookups = fakeLookups({ failWith: new Error('service unavailable') });
      const rule = when({ all: [onEvent('project_id', 'equal', 'prj_1'), { ...projectIs('archived'), operator: 'notEqual' }] });
      const evaluation = await evaluateRule(rule, factsFor(anEvent(), lookups));
      const message = 'project lookup "prj_1" failed: service unavailable';
      expect(evaluation).toMatchObject({ matched: false, error: message });
      expect(evaluation.conditions[0]).toMatchObject({ result: true });
      expect(evaluation.conditions[1]).toMatchObject({ fact: 'project', factValue: undefined, error: message });
    });

    it('does not match a rule using a fact that does not exist, and says so', async () => {
      const rule = when({ all: [{ fact: 'weather', operator: 'equal', value: 'sunny' }] });
      const evaluation = await evaluateRule(rule, factsFor(anEvent()));
      expect(evaluation.matched).toBe(false);
      expect(evaluation.error).toMatch(/^unknown fact "weather" \(facts are: event, now, changes, project, user, tasks\)$/);
      expect(evaluation.conditions).toEqual([
        { fact: 'weather', operator: 'equal', value: 'sunny', factValue: undefined, result: false, group: 'all[0]', skipped: true },
      ]);
    });

    it.each([
      ['an unknown operator', onEvent('title', 'looksLike', 'x'), 'Unknown operator: looksLike'],
      ['an invalid regular expression', onEvent('title', 'matches', '('), 'Invalid regular expression'],
      ['a template with an undefined variable', { ...projectIs('active'), params: { id: '{{ event.nope }}' } }, 'undefined variable'],
    ])('records %s as the rule’s error', async (_name, condition, message) => {
      const evaluation = await evaluateRule(when({ all: [condition] }), factsFor(anEvent()));
      expect(evaluation.matched).toBe(false);
      expect(evaluation.error).toContain(message);
    });
  });
});

describe(evaluateEvent.name, () => {
  const rules = [
    aRule({ id: 'a-by-template', priority: 5, conditions: { all: [onEvent('project_id', 'equal', 'prj_1'), projectIs('active')] } }),
    aRule({ id: 'b-by-literal', conditions: { all: [{ ...projectIs('active'), params: { id: 'prj_1' } }] } }),
    aRule({ id: 'c-decided-by-any', conditions: { any: [onEvent('title', 'matches', '^Release'), { fact: 'user', params: { id: 'usr_1' }, operator: 'isNotEmpty', value: true }] } }),
    aRule({ id: 'd-decided-by-all', conditions: { all: [onEvent('title', 'startsWith', 'Hotfix'), { fact: 'tasks', params: { project_id: 'prj_1' }, operator: 'isEmpty', value: true }] } }),
    aRule({ id: 'e-other-project', conditions: { all: [onEvent('project_id', 'equal', 'prj_2'), projectIs('active')] } }),
  ];

  it('evaluates the candidates in priority order', async () => {
    const { evaluations } = await evaluateEvent(new RuleIndex(rules), anEvent(), factsFor(anEvent()));
    expect(evaluations.map(({ ruleId, matched }) => [ruleId, matched])).toEqual([
      ['a-by-template', true],
      ['b-by-literal', true],
      ['c-decided-by-any', true],
      ['d-decided-by-all', false],
    ]);
  });

  it('looks each resource up at most once per event, and only when a condition needs it', async () => {
    const lookups = fakeLookups();
    const index = new RuleIndex(rules);
    const { evaluations } = await evaluateEvent(index, anEvent(), factsFor(anEvent(), lookups));
    expect(lookups.calls).toEqual(['project:prj_1']);
    expect(evaluations[3].conditions[1]).toMatchObject({ fact: 'tasks', skipped: true });
    await evaluateEvent(index, anEvent(), factsFor(anEvent(), lookups));
    expect(lookups.calls).toEqual(['project:prj_1', 'project:prj_1']);
  });

  it('decides groups of event conditions before a lookup beside them', async () => {
    const lookups = fakeLookups();
    const rule = when({ all: [{ any: [onEvent('title', 'matches', '^Hotfix'), { not: onEvent('status', 'equal', 'completed') }] }, projectIs('active')] });
    const evaluation = await evaluateRule(rule, factsFor(anEvent(), lookups));
    expect(evaluation.matched).toBe(false);
    expect(evaluation.conditions.map(({ group, skipped }) => [group, skipped ?? false])).toEqual([
      ['all[0].any[0]', false],
      ['all[0].any[1].not', false],
      ['all[1]', true],
    ]);
    expect(lookups.calls).toEqual([]);
  });

  it('lists the rules the index left out, when asked', async () => {
    const { excluded } = await evaluateEvent(new RuleIndex(rules), anEvent(), factsFor(anEvent()), { explainExcluded: true });
    expect(excluded.map(({ rule, factValue }) => [rule.id, factValue])).toEqual([['e-other-project', 'prj_1']]);
  });
});

describe(evaluateCheck.name, () => {
  it('passes when the conditions hold, with the same condition results as a rule', async () => {
    const conditions: TopLevelCondition = { all: [onEvent('project_id', 'equal', 'prj_1'), projectIs('active')] };
    const check = await evaluateCheck(conditions, factsFor(anEvent()), aRule({ conditions }));
    const asRule = await evaluateRule(when(conditions), factsFor(anEvent()));
    expect(check).toEqual({ passed: true, conditions: asRule.conditions });
    expect(check.conditions[1]).toMatchObject({ fact: 'project', factValue: 'active', result: true, group: 'all[1]' });
  });

  it('does not pass when a condition fails', async () => {
    const check = await evaluateCheck({ all: [projectIs('archived')] }, factsFor(anEvent()));
    expect(check.passed).toBe(false);
    expect(check.error).toBeUndefined();
    expect(check.conditions[0]).toMatchObject({ result: false, factValue: 'active' });
  });

  it('looks up through the facts it is given: fresh facts make a fresh lookup', async () => {
    const lookups = fakeLookups();
    const conditions: TopLevelCondition = { all: [projectIs('active')] };
    await evaluateCheck(conditions, factsFor(anEvent(), lookups));
    await evaluateCheck(conditions, factsFor(anEvent(), lookups));
    expect(lookups.calls).toEqual(['project:prj_1', 'project:prj_1']);
  });

  it('does not pass, and says why, when a lookup fails', async () => {
    const check = await evaluateCheck({ all: [projectIs('active')] }, factsFor(anEvent(), fakeLookups({ failWith: new Error('HTTP 503') })));
    expect(check).toMatchObject({ passed: false, error: 'project lookup "prj_1" failed: HTTP 503' });
  });

  it('does not pass with an unknown fact', async () => {
    const check = await evaluateCheck({ all: [{ fact: 'weather', operator: 'equal', value: 'sunny' }] }, factsFor(anEvent()));
    expect(check.passed).toBe(false);
    expect(check.error).toMatch(/^unknown fact "weather"/);
  });
});

describe('the local walk (rules that read no lookup)', () => {
  const facts = () => factsFor(anEvent({ estimate: 3, labels: ['a', 'b'], done_at: null }, { id: 'evt_1' } as Partial<RuleEvent>));

  it('is used for rules that read only the event, its changes and now, not for rules with a lookup', () => {
    expect(evaluatedLocally(when({ all: [onEvent('title', 'startsWith', 'Release'), { fact: 'now', path: '$.hour', operator: 'lessThan', value: 25 }] }))).toBe(true);
    expect(evaluatedLocally(when({ all: [onEvent('title', 'startsWith', 'Release'), projectIs('active')] }))).toBe(false);
    expect(evaluatedLocally(when({ all: [onEvent('project_id', 'equal', { fact: 'project', params: { id: 'prj_1' }, path: '$.id' })] }))).toBe(false);
  });

  it('answers at once, with no promise, what evaluateCandidates answers, when no rule reads a lookup', async () => {
    const rules = [
      aRule({ id: 'no-conditions' }),
      when({ all: [onEvent('title', 'startsWith', 'Release'), { fact: 'now', path: '$.hour', operator: 'lessThan', value: 25 }] }),
      aRule({ id: 'not-matching', conditions: { any: [onEvent('estimate', 'greaterThan', 5), { not: onEvent('labels', 'contains', 'a') }] } }),
      aRule({ id: 'unknown-fact', conditions: { all: [{ fact: 'weather', operator: 'equal', value: 'sunny' }] } }),
      aRule({ id: 'own-echoes-too', options: { allowSelfTriggered: true }, conditions: { all: [onEvent('title', 'endsWith', '1.2')] } }),
    ];
    for (const selfCaused of [false, true]) {
      const now = evaluateCandidatesNow(rules, facts(), { selfCaused });
      expect(now).toEqual(await evaluateCandidates(rules, facts(), { selfCaused }));
      expect(now?.map(({ ruleId, outcome }) => [ruleId, outcome])).toEqual(selfCaused
        ? [['no-conditions', 'ignored_self_caused'], ['rule-1', 'ignored_self_caused'], ['not-matching', 'ignored_self_caused'], ['unknown-fact', 'ignored_self_caused'], ['own-echoes-too', 'matched']]
        : [['no-conditions', 'matched'], ['rule-1', 'matched'], ['not-matching', 'not_matched'], ['unknown-fact', 'error'], ['own-echoes-too', 'matched']]);
    }
  });

  it('leaves the answer to json-rules-engine’s walk when a rule reads a lookup or its walk fails, asking for nothing meanwhile', async () => {
    const lookups = fakeLookups();
    const local = when({ all: [onEvent('title', 'startsWith', 'Release')] });
    const withLookup = aRule({ id: 'with-lookup', conditions: { all: [projectIs('active')] } });
    const unknownOperator = aRule({ id: 'unknown-operator', conditions: { all: [onEvent('title', 'looksLike', 'x')] } });
    expect(evaluateCandidatesNow([local, withLookup], factsFor(anEvent(), lookups))).toBeUndefined();
    expect(evaluateCandidatesNow([local, unknownOperator], factsFor(anEvent(), lookups))).toBeUndefined();
    expect(lookups.calls).toEqual([]);
    // evaluateEvent falls back to that walk: the lookup is made, the operator's failure named.
    const { evaluations } = await evaluateEvent(new RuleIndex([local, withLookup, unknownOperator]), anEvent(), factsFor(anEvent(), lookups));
    expect(evaluations.map(({ ruleId, outcome, error }) => [ruleId, outcome, error])).toEqual([
      ['rule-1', 'matched', undefined],
      ['unknown-operator', 'error', 'Unknown operator: looksLike'],
      ['with-lookup', 'matched', undefined],
    ]);
    expect(lookups.calls).toEqual(['project:prj_1']);
  });

  it('gives the answers json-rules-engine gives: results, skipped conditions, values and errors', async () => {
    const leafPaths = ['$.data.task.title', '$.data.task.estimate', '$.data.task.labels', '$.data.task.done_at', '$.data.task.missing', '$.type', '$.data.task.labels[0]'];
    const operators = [
      'equal', 'notEqual', 'in', 'notIn', 'contains', 'doesNotContain', 'lessThan', 'lessThanInclusive', 'greaterThan',
      'greaterThanInclusive', 'matches', 'startsWith', 'endsWith', 'isEmpty', 'isNotEmpty', 'noSuchOperator',
    ];
    const value = fc.oneof(
      fc.constantFrom('Release', 'Release 1.2', 'a', '(', '^R', '', 3, 2.5, 0, null, true, ['a', 'x'], [], 'task.completed'),
      fc.constantFrom(...leafPaths).map((path) => ({ fact: 'event', path })),
    );
    const leaf = fc.oneof(
      fc.record({ fact: fc.constant('event'), path: fc.constantFrom(...leafPaths), operator: fc.constantFrom(...operators), value }),
      fc.record({ fact: fc.constant('now'), path: fc.constantFrom('$.hour', '$.weekday', '$.date'), operator: fc.constantFrom('lessThan', 'equal', 'greaterThan'), value }),
      fc.record({ fact: fc.constant('changes'), operator: fc.constantFrom('isEmpty', 'isNotEmpty', 'equal'), value }),
      fc.record({ fact: fc.constant('event'), path: fc.constant('$.data.task.title'), operator: fc.constantFrom(...operators), value, priority: fc.integer({ min: 1, max: 3 }) }),
    );
    const { condition } = fc.letrec<{ condition: unknown }>((tie) => ({
      condition: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.record({ all: fc.array(tie('condition'), { maxLength: 4 }) }, { requiredKeys: ['all'] }),
        fc.record({ any: fc.array(tie('condition'), { maxLength: 4 }) }, { requiredKeys: ['any'] }),
        fc.record({ not: tie('condition') }),
        fc.record({ all: fc.array(tie('condition'), { maxLength: 3 }), priority: fc.integer({ min: 1, max: 3 }) }),
      ),
    }));
    const topLevel = fc.oneof(
      fc.record({ all: fc.array(condition, { maxLength: 4 }) }),
      fc.record({ any: fc.array(condition, { maxLength: 4 }) }),
      fc.record({ not: condition }),
    ) as fc.Arbitrary<TopLevelCondition>;
    let walkedLocally = 0;
    await fc.assert(
      fc.asyncProperty(topLevel, async (conditions) => {
        const rule = when(conditions);
        if (evaluatedLocally(rule)) walkedLocally++;
        const local = await evaluateRule(rule, facts());
        const engine = await evaluateRule(rule, facts(), { useEngine: true });
        expect(local).toEqual(engine);
        // Answered at once (no promise) exactly when the walk answers; otherwise left to json-rules-engine's walk.
        const now = evaluateCandidatesNow([rule], facts());
        if (now !== undefined) expect(now).toEqual([{ ...engine, rule, outcome: engine.error ? 'error' : engine.matched ? 'matched' : 'not_matched' }]);
        else expect(evaluatedLocally(rule) && engine.error === undefined).toBe(false);
      }),
      { numRuns: 400 },
    );
    expect(walkedLocally).toBeGreaterThan(300);
  });
});
