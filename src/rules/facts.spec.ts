import { Almanac } from 'json-rules-engine';
import {
  computeChanges,
  EventFacts,
  parseSimplePath,
  resolvePath,
  type EventFactsOptions,
  type Lookups,
  type RuleEvent,
} from './facts.js';
import { nowFact } from './now.js';

function anEvent(overrides: Partial<RuleEvent> = {}): RuleEvent {
  return {
    type: 'task.completed',
    data: { task: { id: 'tsk_1', project_id: 'prj_1', title: 'Release 1.2', status: 'completed' } },
    ...overrides,
  };
}

/** An in-memory stand-in for the service, counting calls: the boundary to a remote service. */
function fakeLookups(failWith?: Error): Lookups & { calls: string[] } {
  const calls: string[] = [];
  const answer = <T>(call: string, value: T): Promise<T> => {
    calls.push(call);
    return failWith ? Promise.reject(failWith) : Promise.resolve(value);
  };
  return {
    calls,
    project: (id) => answer(`project:${id}`, { id, status: 'active' }),
    user: (id) => answer(`user:${id}`, { id, role: 'admin' }),
    tasks: (projectId) => answer(`tasks:${projectId}`, [{ id: 'tsk_1', project_id: projectId }]),
  };
}

function someFacts(event = anEvent(), overrides: Partial<EventFactsOptions> = {}): EventFacts {
  return new EventFacts(event, { now: new Date('2024-05-06T10:00:00Z'), lookups: fakeLookups(), ...overrides });
}

const scope = { rule: { id: 'rule-1' } };

describe('facts', () => {
  describe(nowFact.name, () => {
    it.each([
      ['UTC', '2024-05-06T10:00:00.000Z', { iso: '2024-05-06T10:00:00.000Z', date: '2024-05-06', hour: 10, weekday: 1 }],
      ['Europe/Berlin', '2024-05-06T10:00:00.000Z', { iso: '2024-05-06T12:00:00.000+02:00', date: '2024-05-06', hour: 12, weekday: 1 }],
      ['Europe/Berlin', '2024-01-15T10:00:00.000Z', { iso: '2024-01-15T11:00:00.000+01:00', date: '2024-01-15', hour: 11, weekday: 1 }],
      ['America/New_York', '2024-05-06T02:30:15.250Z', { iso: '2024-05-05T22:30:15.250-04:00', date: '2024-05-05', hour: 22, weekday: 7 }],
      ['Asia/Kolkata', '2024-05-06T10:00:00.000Z', { iso: '2024-05-06T15:30:00.000+05:30', date: '2024-05-06', hour: 15, weekday: 1 }],
      ['Europe/Berlin', '2024-05-11T22:00:00.000Z', { iso: '2024-05-12T00:00:00.000+02:00', date: '2024-05-12', hour: 0, weekday: 7 }],
    ])('in %s at %s', (timeZone, at, expected) => {
      expect(nowFact(new Date(at), timeZone)).toEqual(expected);
    });

    it('numbers weekdays from Monday = 1 to Sunday = 7', () => {
      const week = ['2024-05-06', '2024-05-07', '2024-05-08', '2024-05-09', '2024-05-10', '2024-05-11', '2024-05-12'];
      expect(week.map((day) => nowFact(new Date(`${day}T12:00:00Z`)).weekday)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    });

    it('gives in UTC, computed without the time-zone database, what the database gives for Etc/UTC', () => {
      const start = Date.parse('2023-12-31T22:00:00.000Z');
      for (let at = start; at < start + 9 * 86_400_000; at += 3_600_000 + 61_001) {
        expect(nowFact(new Date(at), 'UTC')).toEqual(nowFact(new Date(at), 'Etc/UTC'));
      }
    });

    it('defaults to UTC and rejects an unknown zone', () => {
      expect(nowFact(new Date('2024-05-06T23:59:59Z')).hour).toBe(23);
      expect(() => nowFact(new Date(), 'Mars/Olympus')).toThrow(RangeError);
    });
  });

  describe(computeChanges.name, () => {
    const previous = { id: 't', status: 'open', title: 'A', tags: ['x'], due: null, meta: { a: 1 } };

    it.each([
      ['no previous version', { id: 't', status: 'done' }, undefined, undefined, {}],
      ['nothing changed', { ...previous, tags: ['x'], meta: { a: 1 } }, previous, undefined, {}],
      ['a field changed', { ...previous, status: 'done' }, previous, undefined, { status: { from: 'open', to: 'done' } }],
      ['a field added', { ...previous, assignee_id: 'u1' }, previous, undefined, { assignee_id: { from: null, to: 'u1' } }],
      ['a field removed', { id: 't', status: 'open', tags: ['x'], due: null, meta: { a: 1 } }, previous, undefined, { title: { from: 'A', to: null } }],
      ['a nested value changed', { ...previous, tags: ['x', 'y'] }, previous, undefined, { tags: { from: ['x'], to: ['x', 'y'] } }],
      ['null to absent is no change', { id: 't', status: 'open', title: 'A', tags: ['x'], meta: { a: 1 } }, previous, undefined, {}],
      ['the resource is gone', undefined, { id: 't' }, undefined, { id: { from: 't', to: null } }],
      ['sent changes win', { status: 'done' }, previous, { status: { from: 'x', to: 'y' } }, { status: { from: 'x', to: 'y' } }],
      ['sent changes that are not an object are ignored', { ...previous, title: 'B' }, previous, ['title'], { title: { from: 'A', to: 'B' } }],
    ])('%s', (_name, current, before, sent, expected) => {
      expect(computeChanges(current, before, sent)).toEqual(expected);
    });

    it('keeps a "__proto__" field as a field', () => {
      const current = JSON.parse('{"__proto__": {"x": 1}}') as object;
      const changes = computeChanges(current, {});
      expect(Object.getPrototypeOf(changes)).toBe(Object.prototype);
      expect(Object.keys(changes)).toEqual(['__proto__']);
    });
  });

  describe(parseSimplePath.name, () => {
    it.each([
      ['$.data.task.project_id', ['data', 'task', 'project_id']],
      ['$.data.tags[0].name', ['data', 'tags', '0', 'name']],
      ['$', null],
      ['$..project_id', null],
      ['$.data.tags[*]', null],
      ["$['data']", null],
      ['data.task', null],
      ['$.data.custom-field', null],
    ])('%s → %p', (path, expected) => {
      expect(parseSimplePath(path)).toEqual(expected);
    });
  });

  describe('resolvePath', () => {
    const doc = {
      data: { task: { project_id: 'prj_1', n: 0, f: false, nul: null, tags: ['a', 'b'], title: 'str' } },
      list: [{ b: 1 }],
      empty: '',
    };

    // The fast path must answer exactly what json-rules-engine's JSONPath resolver answers.
    it.each([
      '$.data.task.project_id', '$.data.task.n', '$.data.task.f', '$.data.task.nul', '$.data.task.missing',
      '$.data.task.missing.deeper', '$.data.task.tags', '$.data.task.tags[1]', '$.data.task.tags[5]',
      '$.data.task.tags.length', '$.data.task.title.length', '$.data.task.n.x', '$.data.task.nul.x', '$.list[0].b',
      '$.data.constructor', '$.data.__proto__', '$.data.toString', '$.empty.length', '$.data.task.f.x',
      '$.data.task.tags[*]', '$..project_id',
    ])('%s reads like JSONPath', async (path) => {
      const jsonPath = new Almanac();
      const fast = new Almanac({ pathResolver: resolvePath });
      jsonPath.addFact('doc', doc);
      fast.addFact('doc', doc);
      expect(await fast.factValue('doc', {}, path)).toEqual(await jsonPath.factValue('doc', {}, path));
    });
  });

  describe(EventFacts.name, () => {
    it('says whether anything has read `changes` (an evaluation that did depends on the snapshot they were computed from)', () => {
      const facts = someFacts(anEvent(), { changes: { status: { from: 'open', to: 'completed' } } });
      expect(facts.changesRead).toBe(false);
      expect(facts.changes).toEqual({ status: { from: 'open', to: 'completed' } });
      expect(facts.changesRead).toBe(true);
    });

    describe('lookups', () => {
      it('calls the service once per fact and id, however often asked', async () => {
        const lookups = fakeLookups();
        const facts = someFacts(anEvent(), { lookups });
        const answers = await Promise.all([
          facts.lookup('project', { id: 'prj_1' }, scope),
          facts.lookup('project', { id: 'prj_1' }, { rule: { id: 'rule-2' } }),
          facts.lookup('project', { id: 'prj_2' }, scope),
          facts.lookup('tasks', { project_id: 'prj_1' }, scope),
          facts.lookup('user', { id: 'usr_1' }, scope),
        ]);
        expect(lookups.calls).toEqual(['project:prj_1', 'project:prj_2', 'tasks:prj_1', 'user:usr_1']);
        expect(answers[0]).toBe(answers[1]);
      });

      it('renders template params against the event before looking up', async () => {
        const lookups = fakeLookups();
        const facts = someFacts(anEvent(), { lookups });
        await facts.lookup('project', { id: '{{ event.data.task.project_id }}' }, scope);
        await facts.lookup('project', { id: 'prj_1' }, scope);
        expect(lookups.calls).toEqual(['project:prj_1']);
      });

      it.each([
        ['a missing param', {}, 'fact "project": needs params.id (a string)'],
        ['an undefined variable', { id: '{{ event.data.nothing.id }}' }, 'undefined variable'],
        ['an empty id', { id: '{{ event.data.task.blank }}' }, 'rendered to an empty string'],
      ])('rejects %s without calling the service', async (_name, params, message) => {
        const lookups = fakeLookups();
        const event = anEvent({ data: { task: { blank: '' } } });
        await expect(someFacts(event, { lookups }).lookup('project', params, scope)).rejects.toThrow(message);
        expect(lookups.calls).toEqual([]);
      });

      it('rejects when the service fails, and does not ask again for the same event', async () => {
        const lookups = fakeLookups(new Error('service unavailable'));
        const facts = someFacts(anEvent(), { lookups });
        const expected = 'project lookup "prj_1" failed: service unavailable';
        await expect(facts.lookup('project', { id: 'prj_1' }, scope)).rejects.toThrow(expected);
        await expect(facts.lookup('project', { id: 'prj_1' }, scope)).rejects.toThrow(expected);
        expect(lookups.calls).toEqual(['project:prj_1']);
      });
    });

    it('takes changes from the event when none are given', () => {
      const changes = { status: { from: 'open', to: 'done' } };
      expect(someFacts(anEvent({ data: { changes } })).changes).toBe(changes);
      expect(someFacts(anEvent()).changes).toEqual({});
    });

    it('computes now once per zone, in the default zone unless told', () => {
      const facts = someFacts(anEvent(), { timezone: 'Europe/Berlin' });
      expect(facts.now().hour).toBe(12);
      expect(facts.now('UTC').hour).toBe(10);
      expect(facts.now()).toBe(facts.now('Europe/Berlin'));
    });
  });
});
