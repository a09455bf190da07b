import type { RuleAction } from '../rules/rule.types.js';

/** What an execution keeps of the rule that matched: enough to finish its actions. */
export interface RuleSnapshot {
  id: string;
  name?: string;
  version: string;
  timezone?: string;
  actions: RuleAction[];
  /** `options.debounce.seconds`: the execution first waits this long (SPEC 11). */
  debounceSeconds?: number;
}
