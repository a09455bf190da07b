import { EventFacts, type Lookups } from './facts.js';
import { resolveForEach } from './for-each.js';
import { templateContext } from './template-context.js';
import type { ForEachSource } from './rule.types.js';

const tasks = [
  { id: 'tsk_1', status: 'open' },
  { id: 'tsk_2', status: 'completed' },
  { id: 'tsk_3', status: 'open' },
];
const event = { type: 'project.archived', data: { project: { id: 'prj_1', ids: ['a', 'b'], label: 'x' } } };

function lookups(fail = false): Lookups & { calls: string[] } {
  const calls: string[] = [];
  const answer = <T>(call: string, value: T) => (calls.push(call), fail ? Promise.reject(new Error('HTTP 503')) : Promise.resolve(value));
  return { calls, project: (id) => answer(`project:${id}`, { id }), user: (id) => answer(`user:${id}`, { id }), tasks: (id) => answer(`tasks:${id}`, tasks) };
}

const at = new Date('2026-11-23T10:00:00Z');
const context = templateContext({ id: 'close-tasks' }, event, at, { earlier: { response: { list: [1, 2] } } });
const resolve = (source: ForEachSource, max = 100, service = lookups()) => resolveForEach(source, context, new EventFacts(event, { now: at, lookups: service }), max);
const openTasks: ForEachSource = { fact: 'tasks', params: { project_id: '{{ event.data.project.id }}' }, path: "$[?(@.status != 'completed')]" };

describe(resolveForEach.name, () => {
  describe('a fact reference', () => {
    it('looks the fact up with rendered params and filters it with the JSONPath', async () => {
      const service = lookups();
      expect(await resolve(openTasks, 100, service)).toEqual({ ok: true, items: [tasks[0], tasks[2]] });
      expect(service.calls).toEqual(['tasks:prj_1']);
    });

    it.each([
      ['a whole list', { fact: 'tasks', params: { project_id: 'prj_1' } }, tasks],
      ['a plain path to a list', { fact: 'event', path: '$.data.project.ids' }, ['a', 'b']],
      ['a filter with one match', { fact: 'tasks', params: { project_id: 'prj_1' }, path: "$[?(@.id == 'tsk_2')]" }, [tasks[1]]],
      ['a filter with no match', { fact: 'tasks', params: { project_id: 'prj_1' }, path: "$[?(@.status == 'blocked')]" }, []],
      ['a wildcard', { fact: 'tasks', params: { project_id: 'prj_1' }, path: '$[*].id' }, ['tsk_1', 'tsk_2', 'tsk_3']],
    ])('yields %s', async (_name, source, items) => {
      expect(await resolve(source as ForEachSource)).toEqual({ ok: true, items });
    });
  });

  describe('a template', () => {
    it.each([
      ['an array from the event', '{{ event.data.project.ids }}', ['a', 'b']],
      ['an earlier response', '{{ actions.earlier.response.list }}', [1, 2]],
    ])('yields %s', async (_name, source, items) => {
      expect(await resolve(source)).toEqual({ ok: true, items });
    });
  });

  describe('failures, decided before anything is sent', () => {
    it.each([
      ['more items than the limit', openTasks, 1, 'too_many_items', 'forEach: 2 items, more than MAX_FOREACH_ITEMS (1)'],
      ['a template yielding text', '{{ event.data.project.label }}', 100, 'not_a_list', 'forEach: expected a list, got a string'],
      ['a template yielding an object', '{{ event.data.project }}', 100, 'not_a_list', 'forEach: expected a list, got an object'],
      ['a plain path to an object', { fact: 'event', path: '$.data.project' }, 100, 'not_a_list', 'forEach: expected a list, got an object'],
      ['a plain path to nothing', { fact: 'event', path: '$.data.nothing' }, 100, 'not_a_list', 'forEach: expected a list, got nothing'],
      ['an undefined variable', '{{ event.data.nope }}', 100, 'template_error', 'forEach: undefined variable "event.data.nope"'],
      ['an unknown fact', { fact: 'weather' }, 100, 'lookup_failed', 'forEach: unknown fact "weather"'],
      ['a lookup without its param', { fact: 'tasks' }, 100, 'lookup_failed', 'forEach: fact "tasks": needs params.project_id (a string)'],
    ])('%s', async (_name, source, max, code, message) => {
      expect(await resolve(source as ForEachSource, max)).toEqual({ ok: false, code, message });
    });

    it('reports a failed lookup', async () => {
      expect(await resolve(openTasks, 100, lookups(true))).toEqual({ ok: false, code: 'lookup_failed', message: 'forEach: tasks lookup "prj_1" failed: HTTP 503' });
    });
  });
});
