/**
 * The operators rule files may use beyond json-rules-engine's own (SPEC 5).
 *
 * A fact value of the wrong type (a number where a string is expected, a
 * missing field) makes the condition false instead of failing the rule: facts
 * come from events and the service, and their shape is not ours to enforce.
 * A pattern that is not a valid regular expression does throw: that is a bug
 * in the rule, and the evaluator reports it as the rule's error.
 */
import { Operator, type Engine } from 'json-rules-engine';

// Patterns come from rule files (bounded) or, through `value: {fact: …}`, from
// events (unbounded): the cache is capped so hostile input cannot grow it.
const REGEX_CACHE_SIZE = 1_000;
const regexCache = new Map<string, RegExp>();

function regexFor(pattern: string): RegExp {
  let regex = regexCache.get(pattern);
  if (regex === undefined) {
    regex = new RegExp(pattern); // no `g` flag: test() must not keep state between calls
    if (regexCache.size >= REGEX_CACHE_SIZE) regexCache.clear();
    regexCache.set(pattern, regex);
  }
  return regex;
}

export function matches(factValue: unknown, pattern: unknown): boolean {
  return typeof factValue === 'string' && typeof pattern === 'string' && regexFor(pattern).test(factValue);
}

export function startsWith(factValue: unknown, prefix: unknown): boolean {
  return typeof factValue === 'string' && typeof prefix === 'string' && factValue.startsWith(prefix);
}

export function endsWith(factValue: unknown, suffix: unknown): boolean {
  return typeof factValue === 'string' && typeof suffix === 'string' && factValue.endsWith(suffix);
}

/** Emptiness is only defined for "nothing", strings, arrays and objects. */
function emptiness(value: unknown): boolean | undefined {
  if (value === null || value === undefined) return true;
  if (typeof value === 'string' || Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return undefined; // numbers, booleans: neither empty nor non-empty
}

/** The condition's `value` is ignored (json-rules-engine requires one; write `true`). */
export function isEmpty(factValue: unknown): boolean {
  return emptiness(factValue) === true;
}

export function isNotEmpty(factValue: unknown): boolean {
  return emptiness(factValue) === false;
}

export const EXTRA_OPERATORS: readonly Operator[] = [
  new Operator('matches', matches),
  new Operator('startsWith', startsWith),
  new Operator('endsWith', endsWith),
  new Operator('isEmpty', isEmpty),
  new Operator('isNotEmpty', isNotEmpty),
];

export function addExtraOperators(engine: Engine): Engine {
  for (const operator of EXTRA_OPERATORS) engine.addOperator(operator);
  return engine;
}
