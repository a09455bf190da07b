import { EventFacts, type Lookups, type RuleEvent } from './facts.js';
import { factsUsedBy } from './facts-used.js';
import { evaluateRule } from './rule-evaluator.js';
import type { TopLevelCondition } from './rule.types.js';
import { aRule } from '../../test/support/rule-factory.js';

const event: RuleEvent = { type: 'task.updated', data: { task: { id: 'tsk_1', project_id: 'prj_1', assignee_id: 'usr_1' }, changes: { status: { from: 'open', to: 'done' } } } };

function countingLookups(): Lookups & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    project: async (id) => (calls.push(`project:${id}`), { id, name: 'Apollo' }),
    user: async (id) => (calls.push(`user:${id}`), { id, email: 'a@example.com' }),
    tasks: async (id) => (calls.push(`tasks:${id}`), [{ id: 'tsk_1' }]),
  };
}

async function usedAfterEvaluation(conditions: TopLevelCondition, lookups = countingLookups()) {
  const rule = aRule({ conditions });
  const facts = new EventFacts(event, { now: new Date('2026-11-23T10:00:00Z'), lookups });
  const evaluation = await evaluateRule(rule, facts);
  return { evaluation, used: await factsUsedBy(rule, facts), calls: lookups.calls };
}

describe(factsUsedBy.name, () => {
  it('gives the changes and the lookups the conditions used, without asking the service again', async () => {
    const { evaluation, used, calls } = await usedAfterEvaluation({
      all: [
        { fact: 'changes', path: '$.status.to', operator: 'equal', value: 'done' },
        { fact: 'project', params: { id: '{{ event.data.task.project_id }}' }, path: '$.name', operator: 'equal', value: 'Apollo' },
      ],
    });
    expect(evaluation.matched).toBe(true);
    expect(used).toEqual({ changes: { status: { from: 'open', to: 'done' } }, project: { id: 'prj_1', name: 'Apollo' } });
    expect(calls).toEqual(['project:prj_1']);
  });

  it('leaves out a lookup the conditions did not need, and does not make it', async () => {
    const { used, calls } = await usedAfterEvaluation({
      any: [
        { fact: 'event', path: '$.type', operator: 'equal', value: 'task.updated' },
        { fact: 'user', params: { id: '{{ event.data.task.assignee_id }}' }, path: '$.email', operator: 'isNotEmpty', value: true },
      ],
    });
    expect(used).toEqual({});
    expect(calls).toEqual([]);
  });

  it('gives nothing for a rule without conditions, or with only event and now', async () => {
    expect((await usedAfterEvaluation({ all: [{ fact: 'now', path: '$.hour', operator: 'greaterThanInclusive', value: 0 }] })).used).toEqual({});
    const facts = new EventFacts(event, { now: new Date(), lookups: countingLookups() });
    expect(await factsUsedBy(aRule(), facts)).toEqual({});
  });

  it('finds a fact compared as a value ({"fact": …})', async () => {
    const { used } = await usedAfterEvaluation({
      all: [{ fact: 'event', path: '$.data.task.id', operator: 'in', value: { fact: 'tasks', params: { project_id: 'prj_1' }, path: '$[*].id' } }],
    });
    expect(used).toEqual({ tasks: [{ id: 'tsk_1' }] });
  });
});
