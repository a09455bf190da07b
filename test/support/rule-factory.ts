/** Rules for unit specs: a valid default, changed by overrides, loaded as the engine loads rules. */
import { toLoadedRule } from '../../src/rules/rule-files.js';
import type { LoadedRule, RuleDefinition } from '../../src/rules/rule.types.js';

export function aRule(overrides: Partial<RuleDefinition> = {}): LoadedRule {
  const definition: RuleDefinition = {
    id: 'rule-1',
    on: 'task.completed',
    actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review' } }],
    ...overrides,
  };
  return toLoadedRule(definition, { kind: 'api' });
}
