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

/**
 * An entry of `actions` (SPEC sections 5 and 11): an action (a request to the
 * service), or a step of the execution itself: `delay` (params.duration, an
 * ISO-8601 duration or a template yielding one) or `check` (`conditions`,
 * evaluated when the execution reaches it).
 */
export interface RuleAction {
  id?: string;
  /** One of the action types of actions/action-types.ts (the rule schema's enum lists them), or a step type (STEP_TYPES). */
  type: string;
  /** Absent only on a `check` step. */
  params: Record<string, unknown>;
  continueOnError?: boolean;
  /** `check` steps only. */
  conditions?: TopLevelCondition;
  /** Run the action once per item (actions only). */
  forEach?: ForEachSource;
}

/** A fact reference without operator (`{"fact": "tasks", "params": {…}, "path": "$[…]"}`), or a template yielding an array. */
export type ForEachSource = { fact: string; params?: Record<string, unknown>; path?: string } | string;

/** Entries of `actions` that are steps of the execution, not requests to the service. */
export const STEP_TYPES = ['delay', 'check'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export function isStep(type: string): type is StepType {
  return (STEP_TYPES as readonly string[]).includes(type);
}

export interface DebounceOptions {
  seconds: number;
  /** A template; matched events with the same rendered key collapse into one execution. */
  key: string;
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
  options?: {
    allowSelfTriggered?: boolean;
    throttle?: ThrottleOptions;
    /** Event type patterns (as in `on`): one about the same resource cancels this rule's waiting executions. */
    cancelOn?: string | string[];
    debounce?: DebounceOptions;
  };
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
