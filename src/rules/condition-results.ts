/**
 * Each leaf condition's outcome, as explanations report it (SPEC 6): from the
 * conditions json-rules-engine returns with their results, or the local
 * walk's (local-walk.ts), which has the same shape.
 */

export interface ConditionResult {
  fact: string;
  path?: string;
  params?: Record<string, unknown>;
  operator: string;
  /** The expected value (resolved, when it is a `{fact: …}` reference). */
  value: unknown;
  /** What the fact (at `path`) held; absent when it was undefined. */
  factValue: unknown;
  result: boolean;
  /** Where the condition sits, e.g. `all[1].any[0]`. */
  group: string;
  /** Not evaluated: json-rules-engine had decided without it, or the rule could not run. */
  skipped?: true;
  /** The fact could not be obtained (a lookup failed). */
  error?: string;
}

/** A condition as written, or as json-rules-engine returns it with its outcome. */
export interface ConditionNode {
  all?: ConditionNode[];
  any?: ConditionNode[];
  not?: ConditionNode;
  fact?: string;
  path?: string;
  params?: Record<string, unknown>;
  operator?: string;
  value?: unknown;
  factResult?: unknown;
  valueResult?: unknown;
  result?: boolean;
}


function leafResult(node: ConditionNode, group: string, failures?: ReadonlyMap<string, string>): ConditionResult {
  const evaluated = typeof node.result === 'boolean';
  const fact = String(node.fact);
  const result: ConditionResult = {
    fact,
    operator: String(node.operator),
    value: evaluated ? node.valueResult : node.value,
    factValue: node.factResult,
    result: node.result === true,
    group,
  };
  if (node.path !== undefined) result.path = node.path;
  if (node.params !== undefined) result.params = node.params;
  if (!evaluated) result.skipped = true;
  const failure = failures?.get(fact);
  if (evaluated && failure !== undefined) result.error = failure;
  return result;
}

/** Depth-first, in the order written: one entry per leaf condition. */
export function flattenConditions(
  node: ConditionNode,
  failures?: ReadonlyMap<string, string>,
  group = '',
  out: ConditionResult[] = [],
): ConditionResult[] {
  if (Array.isArray(node.all)) node.all.forEach((child, i) => flattenConditions(child, failures, within(group, `all[${i}]`), out));
  else if (Array.isArray(node.any)) node.any.forEach((child, i) => flattenConditions(child, failures, within(group, `any[${i}]`), out));
  else if (node.not !== undefined) flattenConditions(node.not, failures, within(group, 'not'), out);
  else out.push(leafResult(node, group, failures));
  return out;
}

/**
 * A step inside a group. A function of the module, not a closure made at each call: the engine's bundle keeps the
 * names of functions (scripts/build-engine.mjs), and naming an arrow function made per call costs V8 a redefined
 * property each time (about 0.4 µs), several times an event.
 */
function within(group: string, step: string): string {
  return group === '' ? step : `${group}.${step}`;
}
