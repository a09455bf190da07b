/**
 * The one way the engine parses JSON it did not write itself: `__proto__` and
 * `constructor.prototype` keys are dropped, so hostile input cannot reach any
 * object's prototype. And the one test for "a JSON object".
 */
import secureJson from 'secure-json-parse';

/** @throws SyntaxError when the text is not JSON. */
export function safeJsonParse(text: string): unknown {
  return secureJson.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' });
}

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Stored JSON text back to a value; text that is not JSON is returned as it is, null as null. */
export function parseStoredJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return safeJsonParse(text);
  } catch {
    return text;
  }
}
