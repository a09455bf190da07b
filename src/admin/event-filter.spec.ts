import type { EventEntity } from '../database/event.entity.js';
import { eventMatches, parseEventFilter, ruleMarker } from './event-filter.js';

const event = (over: Partial<EventEntity> = {}) =>
  ({
    type: 'task.completed',
    status: 'processed',
    resourceKey: 'task:tsk_1',
    receivedAt: '2026-11-23T10:00:00.000Z',
    explanation: JSON.stringify([{ ruleId: 'release-review', matched: true, rule: 'release-review', outcome: 'matched' }]),
    ...over,
  }) as EventEntity;

describe(parseEventFilter.name, () => {
  it('reads every filter, a bare resource id meaning any kind', () => {
    expect(parseEventFilter({ type: 'task.completed', status: 'ignored', resource: 'tsk_1', rule: 'r', since: '2026-11-23T10:00:00+01:00' })).toEqual({
      type: 'task.completed',
      status: 'ignored',
      resources: ['task:tsk_1', 'project:tsk_1', 'user:tsk_1', 'workflow_run:tsk_1'],
      rule: 'r',
      since: '2026-11-23T09:00:00.000Z',
    });
    expect(parseEventFilter({ resource: 'project:prj_1', type: '' })).toEqual({ resources: ['project:prj_1'] });
  });

  it('refuses a bad status and bad times, one detail each', () => {
    expect(() => parseEventFilter({ status: 'done' })).toThrow(expect.objectContaining({ code: 'validation_failed', details: [expect.objectContaining({ path: 'status' })] }));
    expect(() => parseEventFilter({ since: 'yesterday', until: 'soon' })).toThrow(
      expect.objectContaining({ details: [expect.objectContaining({ path: 'since' }), expect.objectContaining({ path: 'until' })] }),
    );
  });
});

describe(eventMatches.name, () => {
  it.each<[string, Record<string, string>, Partial<EventEntity>, boolean]>([
    ['no filter', {}, {}, true],
    ['its type', { type: 'task.completed' }, {}, true],
    ['another type', { type: 'task.created' }, {}, false],
    ['another status', { status: 'ignored' }, {}, false],
    ['its resource by bare id', { resource: 'tsk_1' }, {}, true],
    ['another resource', { resource: 'task:tsk_2' }, {}, false],
    ['a rule that was evaluated for it', { rule: 'release-review' }, {}, true],
    ['a rule whose id only starts the same', { rule: 'release' }, {}, false],
    ['a rule, before evaluation', { rule: 'release-review' }, { explanation: null }, false],
    ['a time range around it', { since: '2026-11-23T09:00:00Z', until: '2026-11-23T11:00:00Z' }, {}, true],
    ['a range after it', { since: '2026-11-23T10:00:01Z' }, {}, false],
  ])('%s', (_case, query, over, expected) => {
    expect(eventMatches(parseEventFilter(query), event(over))).toBe(expected);
  });

  it('looks for the rule as the stored explanation writes it', () => {
    expect(ruleMarker('a"b')).toBe('"rule":"a\\"b"');
  });
});
