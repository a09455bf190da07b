import { colors } from './cli-output.js';
import { conditionLines, negated, passes } from './cli-report.js';

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
