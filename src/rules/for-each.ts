/**
 * The items of a `forEach` action (SPEC 11): a fact reference in the shape of
 * a condition leaf without operator, or a template yielding an array.
 *
 * A `path` is resolved as conditions resolve it (facts.ts `resolvePath`). A
 * plain path (`$.data.items`) must lead to an array. A JSONPath that selects
 * (a filter, a wildcard, `..`) yields its matches, a list however many there
 * are; nothing found (null or undefined) is read as no items, and a lone value
 * that is not a list as one item.
 */
import { isObject } from '../json.js';
import { isRemoteFact, parseSimplePath, resolvePath, type EventFacts, type LookupName } from './facts.js';
import { renderTemplateValue, TemplateError, type TemplateContext } from './template.js';
import type { ForEachSource } from './rule.types.js';

/** MAX_FOREACH_ITEMS when the environment does not set it. */
export const MAX_FOREACH_ITEMS_DEFAULT = 100;

export type ForEachItems =
  | { ok: true; items: unknown[] }
  | { ok: false; code: 'too_many_items' | 'not_a_list' | 'template_error' | 'lookup_failed'; message: string };

type Failure = Extract<ForEachItems, { ok: false }>;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return isObject(value) ? 'an object' : `a ${typeof value}`;
}

async function factValue(source: Exclude<ForEachSource, string>, context: TemplateContext, facts: EventFacts): Promise<unknown> {
  switch (source.fact) {
    case 'event':
      return facts.event;
    case 'changes':
      return facts.changes;
    case 'now':
      return context.now;
    default:
      if (!isRemoteFact(source.fact)) throw new Error(`unknown fact "${source.fact}"`);
      return facts.lookup(source.fact as LookupName, source.params, { rule: context.rule });
  }
}

function itemsAt(value: unknown, path: string | undefined): unknown {
  if (path === undefined) return value;
  const found = resolvePath(value as object, path);
  if (parseSimplePath(path) !== null || Array.isArray(found)) return found;
  return found === undefined ? [] : [found];
}

async function sourceValue(source: ForEachSource, context: TemplateContext, facts: EventFacts): Promise<{ ok: true; value: unknown } | Failure> {
  if (typeof source === 'string') {
    try {
      return { ok: true, value: renderTemplateValue(source, context, 'forEach') };
    } catch (error) {
      if (error instanceof TemplateError) return { ok: false, code: 'template_error', message: error.message } satisfies Failure;
      throw error;
    }
  }
  let value: unknown;
  try {
    value = await factValue(source, context, facts);
  } catch (error) {
    return { ok: false, code: 'lookup_failed', message: `forEach: ${messageOf(error)}` } satisfies Failure;
  }
  try {
    return { ok: true, value: itemsAt(value, source.path) };
  } catch (error) {
    return { ok: false, code: 'lookup_failed', message: `forEach: path ${source.path}: ${messageOf(error)}` } satisfies Failure;
  }
}

/**
 * The items an action runs for, or why it runs for none: more than `maxItems`
 * is `too_many_items`, decided before any request is sent.
 */
export async function resolveForEach(source: ForEachSource, context: TemplateContext, facts: EventFacts, maxItems: number): Promise<ForEachItems> {
  const resolved = await sourceValue(source, context, facts);
  if (!resolved.ok) return resolved;
  const { value } = resolved;
  if (!Array.isArray(value)) {
    return { ok: false, code: 'not_a_list', message: `forEach: expected a list, got ${describe(value)}` };
  }
  if (value.length > maxItems) {
    return { ok: false, code: 'too_many_items', message: `forEach: ${value.length} items, more than MAX_FOREACH_ITEMS (${maxItems})` };
  }
  return { ok: true, items: value };
}
