/**
 * The shape of a rule as people write it in `rules/*.json` (SPEC section 5),
 * and of a rule once the engine has loaded it.
 */

export interface ConditionLeaf {
  fact: string;
  operator: string;
  value: unknown;
  path?: string;
  params?: Record<string, unknown>;
}
export type Condition =
  | ConditionLeaf
  | { all: Condition[] }
  | { any: Condition[] }
  | { not: Condition };
export type TopLevelCondition = { all: Condition[] } | { any: Condition[] } | { not: Condition };

export interface RuleAction {
  id?: string;
  /** One of the action types of actions/action-types.ts (the rule schema's enum lists them). */
  type: string;
  params: Record<string, unknown>;
  continueOnError?: boolean;
}

export interface ThrottleOptions {
  limit: number;
  windowSeconds: number;
  key?: string;
}

export interface RuleDefinition {
  $schema?: string;
  id: string;
  name?: string;
  description?: string;
  enabled?: boolean;
  priority?: number;
  on?: string | string[];
  schedule?: { cron: string; timezone?: string };
  conditions?: TopLevelCondition;
  actions: RuleAction[];
  options?: { allowSelfTriggered?: boolean; throttle?: ThrottleOptions };
}

/** Where a loaded rule came from. */
export type RuleSource = { kind: 'file'; path: string } | { kind: 'api' };

/** A validated rule, ready to be indexed and evaluated. */
export interface LoadedRule {
  id: string;
  definition: RuleDefinition;
  source: RuleSource;
  /** sha-256 of the rule's canonical JSON, first 16 hex characters. */
  version: string;
  /** Event type patterns the rule listens to (`schedule.fired` for a cron rule). */
  triggers: string[];
  priority: number;
  enabled: boolean;
}

/** One problem found while validating rule files: `file: json-path: message`. */
export interface RuleProblem {
  file: string;
  path: string;
  message: string;
}

export function formatProblem(problem: RuleProblem): string {
  return `${problem.file}: ${problem.path}: ${problem.message}`;
}
