/**
 * "Why" in words. Wherever the console shows an event, a rule's outcome, an
 * execution or an action run that did not act, one of these says why, from
 * what the admin API recorded: the failing condition and its actual value, the
 * engine action an ignored event echoes, the throttle key, the chain depth,
 * what an event waits behind, what the service answered.
 */
import { short } from './format.js';
import type { ActionRun, ConditionResult, EventContext, EventSummary, Execution, RuleExplanation, WaitingReason } from './types.js';

/** A condition tree rebuilt from the flat leaves (each names its place: `all[1].any[0]`). */
export type ConditionNode = { kind: 'all' | 'any' | 'not'; children: ConditionNode[]; result?: boolean } | { kind: 'leaf'; leaf: ConditionResult; result?: boolean };

export function conditionTree(leaves: ConditionResult[]): ConditionNode | undefined {
  if (leaves.length === 0) return undefined;
  const root: { kind: 'root'; children: ConditionNode[] } = { kind: 'root', children: [] };
  for (const leaf of leaves) {
    let parent: { children: ConditionNode[] } = root;
    for (const step of leaf.group === '' ? [] : leaf.group.split('.')) {
      const m = /^(all|any)\[(\d+)\]$|^(not)$/.exec(step);
      if (!m) continue;
      const kind = (m[1] ?? m[3]) as 'all' | 'any' | 'not';
      let group = parent.children.find((c) => c.kind === kind) as { kind: 'all' | 'any' | 'not'; children: ConditionNode[] } | undefined;
      if (!group) {
        group = { kind, children: [] };
        parent.children.push(group);
      }
      parent = group;
    }
    parent.children.push({ kind: 'leaf', leaf });
  }
  const top = root.children.length === 1 ? root.children[0] : { kind: 'all' as const, children: root.children };
  settle(top);
  return top;
}

/** Each node's result (undefined: not evaluated), from its leaves. */
function settle(node: ConditionNode): boolean | undefined {
  if (node.kind === 'leaf') {
    node.result = node.leaf.skipped ? undefined : node.leaf.result;
    return node.result;
  }
  const results = node.children.map(settle);
  const known = results.filter((r): r is boolean => r !== undefined);
  if (node.kind === 'not') node.result = known.length === 0 ? undefined : !known[0];
  else if (node.kind === 'all') node.result = known.includes(false) ? false : known.length === results.length ? true : undefined;
  else node.result = known.includes(true) ? true : known.length === results.length && known.length > 0 ? false : undefined;
  return node.result;
}

/** The leaves that made `node` come out `wanted` (for a rule that did not match: false at the top). */
export function decisive(node: ConditionNode, wanted = false): ConditionResult[] {
  if (node.result !== wanted) return [];
  if (node.kind === 'leaf') return [node.leaf];
  if (node.kind === 'not') return node.children.flatMap((c) => decisive(c, !wanted));
  return node.children.flatMap((c) => decisive(c, wanted));
}

export function describeLeaf(leaf: ConditionResult): string {
  const where = `${leaf.fact}${leaf.params ? ` ${short(leaf.params, 60)}` : ''}${leaf.path ? ` ${leaf.path}` : ''}`;
  const expected = leaf.operator === 'isEmpty' || leaf.operator === 'isNotEmpty' ? '' : ` ${short(leaf.value, 60)}`;
  const actual = 'factValue' in leaf && leaf.factValue !== undefined ? short(leaf.factValue, 60) : 'nothing (undefined)';
  return `${where} ${leaf.operator}${expected}: the actual value was ${actual}${leaf.error ? ` (${leaf.error})` : ''}`;
}

export function whyNotMatched(conditions: ConditionResult[]): string {
  const tree = conditionTree(conditions);
  if (!tree) return 'not matched';
  const culprits = decisive(tree, false);
  if (culprits.length === 0) return 'not matched: the conditions were not all decided';
  const inverted = (c: ConditionResult) => c.group.split('.').filter((s) => s === 'not').length % 2 === 1;
  const parts = culprits.slice(0, 3).map((c) => `${inverted(c) ? 'the condition under "not" held: ' : 'this condition failed: '}${describeLeaf(c)}`);
  return `not matched: ${parts.join('; ')}${culprits.length > 3 ? `; and ${culprits.length - 3} more` : ''}`;
}

export function ruleOutcome(entry: RuleExplanation, context?: EventContext): string {
  switch (entry.outcome) {
    case 'matched':
      return 'matched: the rule acted (see its execution below)';
    case 'not_matched':
      return whyNotMatched(entry.conditions ?? []);
    case 'error':
      return `not evaluated to the end: ${entry.error ?? 'an error'}`;
    case 'ignored_self_caused': {
      const cause = context?.caused_by;
      const by = cause ? ` made by the engine's action ${cause.action_type} of rule "${cause.rule}" (for event ${cause.event_id})` : ' made by one of the engine\'s own actions';
      return `ignored as self-caused: this event reports a change${by}, and the rule does not set options.allowSelfTriggered`;
    }
    case 'throttled': {
      const t = context?.throttled.find((x) => x.execution === entry.execution);
      const detail = t ? `key ${short(t.key)} already had ${t.limit ?? '?'} execution(s) within ${t.window_seconds ?? '?'} s (options.throttle)` : 'its options.throttle limit was reached';
      return `matched but throttled: ${detail}`;
    }
  }
}

export function waitingReason(reason: WaitingReason): string {
  switch (reason.kind) {
    case 'evaluating':
      return `a worker is evaluating it now (lease until ${reason.lease_until})`;
    case 'postponed':
      return `evaluation postponed until ${reason.until} after ${reason.attempts} attempt(s)${reason.error ? `: ${reason.error}` : ''}`;
    case 'behind_event':
      return `waiting behind an earlier event about the same resource (${reason.resource}): ${reason.event_id}, not evaluated yet`;
    case 'behind_action_runs':
      return `waiting behind the action runs of an earlier event about the same resource (${reason.resource}): ${reason.runs.map((r) => `${r.type} of rule "${r.rule}" is ${r.status}`).join(', ')}`;
    case 'causal_barrier':
      return `waiting for the answer to an action that creates resources (${reason.runs.map((r) => `${r.type} of rule "${r.rule}"`).join(', ')}): the engine has not seen this resource before and must know whether its own action made it`;
    case 'queued':
      return 'in the queue: nothing holds it back; a worker has not taken it yet';
  }
}

/** One sentence for an event's status; `rules` (its explanation, when known) makes an ignored event's reason exact. */
export function eventReason(e: EventSummary, maxDepth?: number, rules?: RuleExplanation[]): string {
  if (e.status === 'ignored' && rules) {
    if (rules.length === 0) return `no rule listens to ${e.type} (or every rule that does is disabled)`;
    if (rules.every((r) => r.outcome === 'ignored_self_caused')) return 'every rule that listened ignored it as self-caused (it reports a change the engine made itself)';
    return `${rules.length} rule(s) listened and none matched (see why below)`;
  }
  switch (e.status) {
    case 'received':
      return e.attempts > 0 && e.error ? `waiting: evaluation postponed after ${e.attempts} attempt(s): ${e.error}` : 'waiting to be evaluated';
    case 'processed':
      return 'a rule matched';
    case 'ignored':
      return e.depth > 0
        ? `no rule matched; self-caused (chain depth ${e.depth}): rules without allowSelfTriggered ignore it`
        : 'no rule that listened matched';
    case 'failed':
      return `could not be evaluated: ${e.error ?? 'unknown error'}`;
    case 'loop_blocked':
      return `loop blocked at chain depth ${e.depth}${maxDepth ? ` (MAX_CHAIN_DEPTH ${maxDepth})` : ''}: nothing evaluated it`;
  }
}

export function runReason(run: ActionRun, attempts?: number): string {
  const said = run.response_status ? `the service answered ${run.response_status}` : '';
  const error = run.error ? `${run.error.code}: ${run.error.message}` : '';
  switch (run.status) {
    case 'pending':
      return `waiting for a worker${run.next_attempt_at ? ` (due ${run.next_attempt_at})` : ''}`;
    case 'running':
      return 'being sent now';
    case 'retrying':
      return `attempt ${attempts ?? run.attempts} failed (${[said, error].filter(Boolean).join(', ') || 'no answer'}); next attempt at ${run.next_attempt_at ?? '?'}`;
    case 'failed':
      return `failed for good after ${run.attempts} attempt(s): ${[said, error].filter(Boolean).join(': ') || 'no answer'}; retry it once the cause is fixed`;
    case 'skipped':
      return 'dry run: the request was recorded, not sent';
    case 'succeeded':
      return said || 'succeeded';
  }
}

export function executionReason(x: Execution, context?: EventContext): string {
  const runs = x.actions ?? [];
  switch (x.status) {
    case 'succeeded':
      return x.actions ? `succeeded: ${runs.length} action(s) done` : 'succeeded: every action done';
    case 'skipped':
      return 'dry run: the requests were recorded, not sent (DRY_RUN)';
    case 'throttled':
      return ruleOutcome({ rule: x.rule, outcome: 'throttled', execution: x.id }, context);
    case 'failed': {
      const failed = runs.find((r) => r.status === 'failed');
      return failed ? `failed: ${failed.type} ${runReason(failed)}` : `failed: ${x.error ?? 'an action failed'}`;
    }
    case 'running': {
      const open = runs.find((r) => r.status !== 'succeeded' && r.status !== 'skipped' && r.status !== 'failed');
      return open ? `running: ${open.type} is ${open.status}: ${runReason(open)}` : 'running: starting its next action';
    }
  }
}
