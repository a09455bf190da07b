/**
 * Liquid templates in rule action params (SPEC 5, "Templates").
 *
 * Params are compiled once per rule (every template parsed up front, so a
 * syntax error names its param path when the rule loads) and rendered per run.
 * A string that is exactly one `{{ expr }}` (nothing around it, not even
 * whitespace) keeps the value's type: such a string parses to a single Output,
 * which a second engine with LiquidJS's `keepOutputType` renders. Any other
 * string renders as text, exactly as LiquidJS renders it: `" {{ n }} "` is
 * `" 10 "`, never the number 10.
 *
 * Sandbox: strict variables and own-property-only lookups (no prototypes, no
 * `constructor`), a null-prototype scope holding only the context names,
 * no file system (the partial/layout tags are removed and lookups go to an
 * empty in-memory map), and parse/time/memory limits so a template bomb ends
 * as a TemplateError instead of stalling the worker.
 */
import { Liquid, Output, UndefinedVariableError } from 'liquidjs';
import type { LiquidOptions, Template } from 'liquidjs';
import { isObject } from '../json.js';

export interface TemplateContext {
  event: unknown;
  rule: { id: string; name?: string };
  now: unknown;
  /** Earlier actions of the same run: `actions.<id>.response`. */
  actions?: Readonly<Record<string, { response: unknown }>>;
  /** Values of the facts the rule's conditions used for this event (SPEC 11): `facts.<name>`. */
  facts?: Readonly<Record<string, unknown>>;
  /** Inside a `forEach` action: the current item and its position (from 0). */
  item?: unknown;
  index?: number;
}

export class TemplateError extends Error {
  readonly code = 'template_error' as const;

  constructor(
    message: string,
    /** Where the template sits, e.g. `params.input.task_id`. */
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TemplateError';
  }
}

/** The compiled form of a params value; opaque to callers. */
export type CompiledParams = CompiledNode;

type CompiledNode =
  | { kind: 'literal'; value: unknown }
  | { kind: 'typed'; path: string; templates: Template[]; plain?: PlainTemplate }
  | { kind: 'text'; path: string; templates: Template[]; plain?: PlainTemplate }
  | { kind: 'array'; items: CompiledNode[] }
  | { kind: 'object'; entries: Array<[string, CompiledNode]> };

/** Longest template source accepted; real params templates are a few hundred characters. */
export const MAX_TEMPLATE_LENGTH = 100_000;

const LIQUID_OPTIONS: LiquidOptions = {
  strictVariables: true,
  strictFilters: true, // a misspelt filter is a rule bug, not a silent no-op
  lenientIf: true, // `| default:` and `{% if x %}` may test a missing value on purpose
  ownPropertyOnly: true,
  templates: {}, // an empty in-memory "file system": nothing on disk is reachable
  parseLimit: MAX_TEMPLATE_LENGTH,
  renderLimit: 100, // ms per template; real templates render in microseconds
  memoryLimit: 1_000_000, // ranges, joins and the like, in elements/characters
  timezoneOffset: 0, // the `date` filter must not depend on the host's zone
};

function createEngine(keepOutputType: boolean): Liquid {
  const engine = new Liquid({ ...LIQUID_OPTIONS, keepOutputType });
  for (const tag of ['include', 'render', 'layout']) delete engine.tags[tag];
  return engine;
}

const textEngine = createEngine(false);
const typedEngine = createEngine(true);

function hasTemplate(value: string): boolean {
  return value.includes('{{') || value.includes('{%');
}

/**
 * The common case rendered without LiquidJS: text and outputs that are each a
 * bare variable path (`Done: {{ event.data.task.title }}`), no filters, no
 * tags. Each part is the text between outputs, or the property path of one.
 * Rendering looks the path up through own properties of plain objects and
 * renders strings, finite numbers and booleans as LiquidJS does (`String`); on
 * anything else (a missing property, an array, null, an object to render, a
 * name outside the scope) it gives up and LiquidJS renders the template, so
 * the answer, or the error, is always LiquidJS's (template.spec.ts compares
 * the two).
 */
type PlainTemplate = Array<string | string[]>;

const PLAIN_OUTPUT = /\{\{\s*([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\s*\}\}/g;
const SCOPE_NAMES = new Set(['event', 'rule', 'now', 'actions', 'facts', 'item', 'index']);

function plainTemplate(source: string): PlainTemplate | undefined {
  const parts: PlainTemplate = [];
  let last = 0;
  for (const match of source.matchAll(PLAIN_OUTPUT)) {
    const path = match[1].split('.');
    if (!SCOPE_NAMES.has(path[0])) return undefined;
    if (match.index > last) parts.push(source.slice(last, match.index));
    parts.push(path);
    last = match.index + match[0].length;
  }
  if (last < source.length) parts.push(source.slice(last));
  // Anything left that LiquidJS would read as markup (a tag, an output with filters or brackets) is not plain.
  return parts.some((part) => typeof part === 'string' && (part.includes('{{') || part.includes('{%') || part.includes('}}'))) ? undefined : parts;
}

const hasOwn = Object.prototype.hasOwnProperty;
/** Why a plain lookup gave up: LiquidJS renders the template instead. */
const NOT_PLAIN = Symbol('not plain');

function lookUp(context: TemplateContext, path: string[]): string | number | boolean | typeof NOT_PLAIN {
  const root = path[0];
  if ((root === 'item' || root === 'index') && context.index === undefined) return NOT_PLAIN;
  let value: unknown = context[root as keyof TemplateContext];
  for (let i = 1; i < path.length; i++) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !hasOwn.call(value, path[i])) return NOT_PLAIN;
    value = (value as Record<string, unknown>)[path[i]];
  }
  if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return value;
  return NOT_PLAIN;
}

function renderPlain(plain: PlainTemplate, context: TemplateContext, typed: boolean): unknown {
  if (typed) return plain.length === 1 && typeof plain[0] !== 'string' ? lookUp(context, plain[0]) : NOT_PLAIN;
  let text = '';
  for (const part of plain) {
    if (typeof part === 'string') text += part;
    else {
      const value = lookUp(context, part);
      if (value === NOT_PLAIN) return NOT_PLAIN;
      text += String(value);
    }
  }
  return text;
}

function explain(error: unknown): string {
  if (error instanceof UndefinedVariableError) {
    const variable = /^undefined variable: (.*?), line:\d+, col:\d+$/.exec(error.message)?.[1];
    if (variable !== undefined) return `undefined variable "${variable}"`;
  }
  return error instanceof Error ? error.message : String(error);
}

function toTemplateError(error: unknown, path: string): TemplateError {
  return new TemplateError(`${path}: ${explain(error)}`, path, { cause: error });
}

function compileString(source: string, path: string, keepType: boolean): CompiledNode {
  if (!hasTemplate(source)) return { kind: 'literal', value: source };
  if (source.length > MAX_TEMPLATE_LENGTH) {
    throw new TemplateError(`${path}: template longer than ${MAX_TEMPLATE_LENGTH} characters`, path);
  }
  let templates: Template[];
  try {
    templates = textEngine.parse(source);
  } catch (error) {
    // Whatever LiquidJS throws here (ParseError, its own AssertionError) means "not a valid template".
    throw toTemplateError(error, path);
  }
  // Any text around the output, whitespace included, parses to templates of its own.
  const plain = plainTemplate(source);
  if (keepType && templates.length === 1 && templates[0] instanceof Output) {
    return { kind: 'typed', path, templates, ...(plain && { plain }) };
  }
  return { kind: 'text', path, templates, ...(plain && { plain }) };
}

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function compileNode(value: unknown, path: string): CompiledNode {
  if (typeof value === 'string') return compileString(value, path, true);
  if (Array.isArray(value)) {
    const items = value.map((item, index) => compileNode(item, `${path}[${index}]`));
    return items.every((item) => item.kind === 'literal') ? { kind: 'literal', value } : { kind: 'array', items };
  }
  if (isObject(value)) {
    const entries = Object.entries(value).map(([key, item]): [string, CompiledNode] => [key, compileNode(item, childPath(path, key))]);
    return entries.every(([, item]) => item.kind === 'literal') ? { kind: 'literal', value } : { kind: 'object', entries };
  }
  return { kind: 'literal', value };
}

/**
 * Parses every template in `params` once. Subtrees without templates are kept
 * as the original values, so rendering them costs nothing.
 * @throws TemplateError on a syntax error, naming the param path.
 */
export function compileParams(params: unknown, path = 'params'): CompiledParams {
  return compileNode(params, path);
}

/**
 * Only the documented names, on a null prototype: nothing else resolves.
 * `item` and `index` exist only inside a forEach action, so elsewhere they are
 * undefined variables (a template_error), not silently empty.
 */
function toScope(context: TemplateContext): object {
  const scope = Object.assign(Object.create(null) as object, {
    event: context.event,
    rule: context.rule,
    now: context.now,
    actions: context.actions ?? {},
    facts: context.facts ?? {},
  });
  return context.index === undefined ? scope : Object.assign(scope, { item: context.item, index: context.index });
}

function renderTemplates(engine: Liquid, templates: Template[], context: TemplateContext, path: string): unknown {
  try {
    // A fresh scope per template: tags like `increment` write into it.
    return engine.renderSync(templates, toScope(context));
  } catch (error) {
    throw toTemplateError(error, path);
  }
}

function renderNode(node: CompiledNode, context: TemplateContext, plainToo = true): unknown {
  switch (node.kind) {
    case 'literal':
      return node.value;
    case 'typed': {
      const value = node.plain && plainToo ? renderPlain(node.plain, context, true) : NOT_PLAIN;
      return value !== NOT_PLAIN ? value : renderTemplates(typedEngine, node.templates, context, node.path);
    }
    case 'text': {
      const value = node.plain && plainToo ? renderPlain(node.plain, context, false) : NOT_PLAIN;
      return value !== NOT_PLAIN ? value : String(renderTemplates(textEngine, node.templates, context, node.path));
    }
    case 'array':
      return node.items.map((item) => renderNode(item, context, plainToo));
    case 'object':
      // fromEntries defines own properties, so a `__proto__` key stays a plain key.
      return Object.fromEntries(node.entries.map(([key, item]) => [key, renderNode(item, context, plainToo)]));
  }
}

/**
 * Renders compiled params against a run's context. Typed values are returned
 * by reference (e.g. the event's own sub-object): treat the result as read-only.
 * @throws TemplateError naming the param path and, for an undefined variable, the variable.
 */
export function renderParams(compiled: CompiledParams, context: TemplateContext): unknown {
  return renderNode(compiled, context);
}

/** Renders every template with LiquidJS, none by the plain path: what the plain path must agree with (template.spec.ts). */
export function renderWithLiquidJsOnly(params: unknown, context: TemplateContext): unknown {
  return renderNode(compileParams(params), context, false);
}

/** Compile and render in one go, for params used once. */
export function renderTemplateValue(params: unknown, context: TemplateContext, path = 'params'): unknown {
  return renderParams(compileParams(params, path), context);
}

// One-off strings (throttle keys, condition params) come from rule files: a
// bounded cache keeps them parsed once without growing with hostile input.
const STRING_CACHE_SIZE = 500;
const stringCache = new Map<string, CompiledNode>();

function compileCached(template: string, path: string): CompiledNode {
  const key = `${path}\u0000${template}`;
  let node = stringCache.get(key);
  if (node === undefined) {
    node = compileString(template, path, false);
    if (stringCache.size >= STRING_CACHE_SIZE) stringCache.clear();
    stringCache.set(key, node);
  }
  return node;
}

/** Renders one template to a string (never typed), e.g. a throttle key. */
export function renderString(template: string, context: TemplateContext, path = 'template'): string {
  const node = compileCached(template, path);
  return node.kind === 'text' ? String(renderNode(node, context)) : template;
}
