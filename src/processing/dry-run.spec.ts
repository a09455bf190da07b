import type { EventEnvelope } from '../intake/envelope.js';
import type { Lookups } from '../rules/facts.js';
import type { RuleAction, TopLevelCondition } from '../rules/rule.types.js';
import { aRule } from '../../test/support/rule-factory.js';
import { previewActions, testRule } from './dry-run.js';

const event = {
  id: 'evt_1',
  type: 'project.archived',
  created_at: '2026-11-23T09:00:00.000Z',
  data: { project: { id: 'prj_1', wait: 'PT2H' } },
} as EventEnvelope;
const now = new Date('2026-11-23T10:00:00Z');

/** The service's tasks of prj_1 as they are now; a stand-in for the remote service. */
function service(tasks: Array<{ id: string; status: string }>): Lookups & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    project: async (id) => (calls.push(`project:${id}`), { id, name: 'Apollo', status: 'archived' }),
    user: async (id) => (calls.push(`user:${id}`), { id }),
    tasks: async (id) => (calls.push(`tasks:${id}`), tasks),
  };
}

/** A check step has no params (the schema refuses them); the shared type still declares them. */
const checkStep = (conditions: TopLevelCondition) => ({ type: 'check', conditions }) as Partial<RuleAction> as RuleAction;
const openTasks = { fact: 'tasks', params: { project_id: '{{ event.data.project.id }}' }, path: "$[?(@.status != 'completed')]" };
const closeEach: RuleAction = { id: 'close', type: 'task.update', forEach: openTasks, params: { id: '{{ item.id }}', status: 'completed', note: '{{ index }}' } };
const isArchived = { all: [{ fact: 'project', params: { id: '{{ event.data.project.id }}' }, path: '$.status', operator: 'equal', value: 'archived' }] };
const three = [{ id: 'tsk_1', status: 'open' }, { id: 'tsk_2', status: 'completed' }, { id: 'tsk_3', status: 'open' }, { id: 'tsk_4', status: 'blocked' }];

describe('dry runs of time and sets (SPEC 11)', () => {
  describe('delay', () => {
    it('shows a delay as its duration, rendered, and goes on with the entries after it', async () => {
      const rule = aRule({ actions: [{ type: 'delay', params: { duration: '{{ event.data.project.wait }}' } }, { type: 'project.update', params: { id: 'prj_1', name: 'x' } }] });
      const [delay, update] = await previewActions(rule, event, now);
      expect(delay).toEqual({ type: 'delay', delay: { duration: 'PT2H', ms: 7_200_000 } });
      expect(update.request).toMatchObject({ method: 'PATCH', path: '/projects/prj_1' });
    });

    it('stops at a duration that is not one', async () => {
      const rule = aRule({ actions: [{ type: 'delay', params: { duration: 'P{{ event.data.project.id }}' } }, { type: 'project.update', params: { id: 'prj_1' } }] });
      expect(await previewActions(rule, event, now)).toEqual([
        { type: 'delay', error: { code: 'invalid_duration', message: 'params.duration: "Pprj_1" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M' } },
      ]);
    });
  });

  describe('check', () => {
    const checked = (status: string) =>
      aRule({
        actions: [
          checkStep({ all: [{ fact: 'tasks', params: { project_id: 'prj_1' }, path: '$[0].status', operator: 'equal', value: status }] }),
          { type: 'project.update', params: { id: 'prj_1' } },
        ],
      });

    it('evaluates a check against the lookups of now, and shows its condition results', async () => {
      const lookups = service(three);
      const result = await testRule(checked('open'), event, { lookups, now });
      expect(result.actions[0]).toEqual({
        type: 'check',
        check: { passed: true, conditions: [expect.objectContaining({ fact: 'tasks', factValue: 'open', result: true, group: 'all[0]' })] },
      });
      expect(result.actions).toHaveLength(2);
      expect(lookups.calls).toEqual(['tasks:prj_1']);
    });

    it('ends the preview at a check that does not pass now, as the execution would stop there', async () => {
      const result = await testRule(checked('completed'), event, { lookups: service(three), now });
      expect(result.actions).toEqual([{ type: 'check', check: expect.objectContaining({ passed: false }) }]);
    });
  });

  describe('forEach', () => {
    it('renders one request per item, with item, index and the facts the conditions used', async () => {
      const rule = aRule({ conditions: isArchived, actions: [{ ...closeEach, params: { ...closeEach.params, note: '{{ index }}: {{ facts.project.name }}' } }] });
      const lookups = service(three);
      const result = await testRule(rule, event, { lookups, now });
      expect(result.matched).toBe(true);
      expect(result.actions[0].items).toEqual([
        { index: 0, request: expect.objectContaining({ method: 'PATCH', path: '/tasks/tsk_1', body: { status: 'completed', note: '0: Apollo' } }) },
        { index: 1, request: expect.objectContaining({ method: 'PATCH', path: '/tasks/tsk_3', body: { status: 'completed', note: '1: Apollo' } }) },
        { index: 2, request: expect.objectContaining({ method: 'PATCH', path: '/tasks/tsk_4', body: { status: 'completed', note: '2: Apollo' } }) },
      ]);
      expect(result.actions[0].request).toBeUndefined();
      expect(lookups.calls).toEqual(['project:prj_1', 'tasks:prj_1']);
    });

    it('shows too_many_items, with no request at all, when the set is larger than the limit', async () => {
      const rule = aRule({ actions: [closeEach, { type: 'project.update', params: { id: 'prj_1' } }] });
      const result = await testRule(rule, event, { lookups: service(three), now, maxForEachItems: 2 });
      expect(result.actions).toEqual([
        { id: 'close', type: 'task.update', error: { code: 'too_many_items', message: 'forEach: 3 items, more than MAX_FOREACH_ITEMS (2)' } },
      ]);
    });

    it('shows an item whose request cannot be rendered, next to the others', async () => {
      const rule = aRule({ actions: [{ type: 'task.update', forEach: '{{ event.data.project.list }}', params: { id: '{{ item.id }}' } }] });
      const listed = { ...event, data: { project: { id: 'prj_1', list: [{ id: 'tsk_1' }, { name: 'no id' }] } } } as EventEnvelope;
      const [preview] = await previewActions(rule, listed, now);
      expect(preview.items).toEqual([
        { index: 0, request: expect.objectContaining({ path: '/tasks/tsk_1' }) },
        { index: 1, error: { code: 'template_error', message: 'params.id: undefined variable "item.id"' } },
      ]);
    });

    it('gives a later action the list of the items\' responses', async () => {
      const rule = aRule({ actions: [closeEach, { type: 'workflow.trigger', params: { id: 'wf_1', input: { closed: '{{ actions.close.response | map: "id" | join: "," }}' } } }] });
      const [, trigger] = await previewActions(rule, event, now, { facts: undefined });
      // Without lookups the forEach source cannot be read: the preview says so and stops.
      expect(trigger).toBeUndefined();
      const result = await testRule(rule, event, { lookups: service(three), now });
      expect(result.actions[1].request?.body).toEqual({ closed: 'dry-run-close-0,dry-run-close-1,dry-run-close-2' });
    });
  });

  describe('a rule without steps', () => {
    it('previews exactly as before: one request per action, no step fields', async () => {
      const rule = aRule({ actions: [{ type: 'project.update', params: { id: '{{ event.data.project.id }}', name: 'x' } }] });
      const previews = await previewActions(rule, event, now);
      expect(previews).toEqual([{ type: 'project.update', request: expect.objectContaining({ method: 'PATCH', path: '/projects/prj_1', body: { name: 'x' } }) }]);
    });
  });
});
