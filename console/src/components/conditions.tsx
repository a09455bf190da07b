/**
 * A rule's condition tree (`all` / `any` / `not`) with each leaf's fact, path,
 * operator, expected value, actual value and result; the leaves that decided
 * a rule that did not match are highlighted and marked in words.
 */
import { conditionTree, decisive, type ConditionNode } from '../explain.js';
import type { ConditionResult } from '../types.js';
import { Inline } from './value.js';

function mark(result: boolean | undefined): string {
  return result === undefined ? 'not evaluated' : result ? 'true' : 'false';
}

function Leaf({ leaf, failing }: { leaf: ConditionResult; failing: boolean }) {
  const result = leaf.skipped ? undefined : leaf.result;
  return (
    <li class={`leaf r-${mark(result).replace(' ', '-')}${failing ? ' failing' : ''}`} data-failing={failing ? 'true' : undefined}>
      <span class="result" aria-label={`result ${mark(result)}`}>
        {result === undefined ? '–' : result ? '✓' : '✗'}
      </span>{' '}
      <span class="fact">{leaf.fact}</span>
      {leaf.params ? (
        <>
          {' '}
          <span class="muted">params</span> <Inline value={leaf.params} />
        </>
      ) : null}
      {leaf.path ? <code class="path">{leaf.path}</code> : null} <span class="op">{leaf.operator}</span>{' '}
      {leaf.operator === 'isEmpty' || leaf.operator === 'isNotEmpty' ? null : (
        <>
          <span class="muted">expected</span> <Inline value={leaf.value} />{' '}
        </>
      )}
      <span class="muted">actual</span> <span class="actual">{'factValue' in leaf ? <Inline value={leaf.factValue} /> : <span class="v-null">undefined</span>}</span>
      {leaf.skipped ? <span class="muted"> (not evaluated: decided without it)</span> : null}
      {leaf.error ? <span class="error-text"> {leaf.error}</span> : null}
      {failing ? <strong class="failing-note"> ← {leaf.group.includes('not') && result ? 'held under "not"' : 'failed'}</strong> : null}
    </li>
  );
}

function Node({ node, failing }: { node: ConditionNode; failing: Set<ConditionResult> }) {
  if (node.kind === 'leaf') return <Leaf leaf={node.leaf} failing={failing.has(node.leaf)} />;
  return (
    <li class="group">
      <span class={`group-kind r-${mark(node.result).replace(' ', '-')}`}>
        {node.kind} <span class="muted">({mark(node.result)})</span>
      </span>
      <ul>
        {node.children.map((child, i) => (
          <Node key={i} node={child} failing={failing} />
        ))}
      </ul>
    </li>
  );
}

export function ConditionTree({ conditions, matched }: { conditions: ConditionResult[]; matched: boolean }) {
  const tree = conditionTree(conditions);
  if (!tree) return <p class="muted">No conditions: the rule matches every event it listens to.</p>;
  const failing = new Set(matched ? [] : decisive(tree, false));
  return (
    <ul class="conditions" aria-label="conditions">
      <Node node={tree} failing={failing} />
    </ul>
  );
}
