import { colors } from './cli-output.js';
import type { ActionPreview } from '../processing/dry-run.js';
import { actionLines, conditionLines, failedActions, negated, passes, sentRequests } from './cli-report.js';

const leaf = (group: string, result: boolean) => ({
  fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Review:', factValue: 'Release 1.0', result, group,
});

describe(passes.name, () => {
  it.each([
    ['all[0]', true, true],
    ['all[0]', false, false],
    ['not', false, true],
    ['not', true, false],
    ['all[1].not', false, true],
    ['not.not', false, false],
  ])('counts a leaf at %s with result %s as %s for its rule', (group, result, expected) => {
    expect(passes({ group, result })).toBe(expected);
    expect(negated({ group })).toBe(group.split('.').filter((s) => s === 'not').length % 2 === 1);
  });
});

describe(conditionLines.name, () => {
  it('marks a failed leaf under a not as passing, and says why', () => {
    const [line] = conditionLines([leaf('not', false)], colors(false));
    expect(line).toMatch(/^ {2}✓ not/);
    expect(line).toContain('negated by not');
  });

  it('marks a plain failed leaf as failed', () => {
    expect(conditionLines([leaf('all[0]', false)], colors(false))[0]).toMatch(/^ {2}✗ all\[0\]/);
  });
});

describe(actionLines.name, () => {
  const request = (path: string) => ({ operation: 'tasks.update', method: 'PATCH', path, body: { status: 'completed' } }) as ActionPreview['request'];

  it('shows a delay as its duration, a check with its conditions, and one request per forEach item', () => {
    const previews: ActionPreview[] = [
      { type: 'delay', delay: { duration: 'PT72H', ms: 259_200_000 } },
      { type: 'check', check: { passed: true, conditions: [leaf('all[0]', true)] } },
      { type: 'task.update', id: 'close', items: [{ index: 0, request: request('/tasks/tsk_1') }, { index: 1, error: { code: 'template_error', message: 'params.id: undefined variable "item.id"' } }] },
    ];
    expect(actionLines(previews, 3, colors(false))).toEqual([
      '  ⏸ 1. delay: waits PT72H',
      '  ✓ 2. check: passes now',
      '      ✓ all[0]  event $.data.task.title startsWith "Review:"  (actual: "Release 1.0")',
      '  → 3. task.update (close): for each of 2 items',
      '      → [0]: PATCH /v1/tasks/tsk_1',
      '          {"status":"completed"}',
      '      ✗ [1]: template_error: params.id: undefined variable "item.id"',
    ]);
    expect(sentRequests(previews)).toBe(1);
    expect(failedActions(previews)).toBe(1);
  });

  it('shows a check that does not pass, too_many_items, and what would not run after them', () => {
    const stopped: ActionPreview[] = [{ type: 'check', check: { passed: false, conditions: [] } }];
    expect(actionLines(stopped, 3, colors(false))).toEqual([
      '  ✗ 1. check: does not pass now: the execution would stop here',
      '  (the 2 actions after it would not run)',
    ]);
    const tooMany: ActionPreview[] = [{ type: 'task.update', error: { code: 'too_many_items', message: 'forEach: 150 items, more than MAX_FOREACH_ITEMS (100)' } }];
    expect(actionLines(tooMany, 1, colors(false))).toEqual(['  ✗ 1. task.update: too_many_items: forEach: 150 items, more than MAX_FOREACH_ITEMS (100)']);
    expect(sentRequests(tooMany)).toBe(0);
  });
});
