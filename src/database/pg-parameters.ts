/**
 * PostgreSQL: the hot path's parameters as node-postgres sends them, but an array (a batch statement's column, read
 * with `unnest(?::text[])`) in PostgreSQL's binary array format where the statement's cast names its element type,
 * and otherwise written as its array literal by `JSON.stringify` instead of node-postgres's `arrayString`.
 *
 * Why binary: the server reads a literal character by character (`array_in`: quotes, backslashes, and each element
 * through its type's input function), and a batch's columns carry its JSON (payloads, requests, conditions,
 * explanations), about 3 kB an event end to end, every `"` of it escaped. `array_in` was 7.6 % of the backends' CPU
 * (`perf`, session 47); the binary form is each element's length and bytes, copied. Timed apart on 40 elements of
 * 513 bytes: 221–252 µs a query against 312–341 µs, the client's CPU 119–123 µs against 152–181. node-postgres sends
 * a Buffer parameter in binary format and has no encoder for arrays (pg-types reads binary arrays only), hence these
 * few lines: a header (one dimension, whether any element is NULL, the element type's OID, the length, lower bound
 * 1), then each element's length (-1 for NULL) and bytes. The server checks the element type against the statement's
 * (`array_recv`), so an array goes binary only where the SQL casts the parameter to a type named below and every
 * element is of it.
 *
 * Why `JSON.stringify` for the rest: node-postgres escapes each element with two `replace` calls and joins the
 * literal by concatenation: in an end-to-end run on PostgreSQL that was a third of all the engine allocated (session
 * 45, V8's sampling heap profiler with the objects collected young counted: `replace` 18 %, `prepareValue` 15 %,
 * about 28 kB an event), which the young generation's collections then copied and promoted; `JSON.stringify` writes
 * the literal in one native pass, 2.8× faster timed apart on a batch's columns.
 *
 * A JSON array of strings, numbers, booleans and nulls is a PostgreSQL array literal once its brackets are braces:
 * strings are double-quoted with `"` and `\` escaped by a backslash, which is how PostgreSQL reads a quoted element
 * (`"NULL"` stays a string), and an unquoted `null` is NULL. JSON also escapes control characters (`\n`, `\u0001`)
 * and lone surrogates, which PostgreSQL would read otherwise (`\n` as `n`): an array holding one of those, or any
 * other kind of value (a nested array, a Buffer, a Date, an object, NaN), is left to node-postgres.
 */

/** Element types an array parameter may be sent as in binary, by the name its cast gives (`?::text[]`): their OIDs. */
const ELEMENT_TYPES: ReadonlyMap<string, ElementType> = new Map([
  ['text', 25], ['varchar', 1043], ['int', 23], ['int4', 23], ['integer', 23], ['bool', 16], ['boolean', 16],
]);
export type ElementType = 25 | 1043 | 23 | 16;

/**
 * For each parameter of a statement in PostgreSQL's dialect (`$1`, `$2`, …), the element type of the array its first
 * cast makes it (`$3::text[]`), where binary can carry it; undefined for the others.
 */
export function arrayParameterTypes(text: string): ReadonlyArray<ElementType | undefined> {
  const types: Array<ElementType | undefined> = [];
  const seen = new Set<number>();
  for (const [, n, type] of text.matchAll(/\$(\d+)::([a-z0-9_]+)\[\]/g)) {
    const index = Number(n) - 1;
    if (seen.has(index)) continue;
    seen.add(index);
    types[index] = ELEMENT_TYPES.get(type!);
  }
  return types;
}

const INT4_MIN = -2_147_483_648;
const INT4_MAX = 2_147_483_647;

/** One element's bytes after its length, or undefined when it is not of the type. */
function elementSize(value: unknown, type: ElementType): number | undefined {
  if (type === 23) return Number.isInteger(value) && (value as number) >= INT4_MIN && (value as number) <= INT4_MAX ? 4 : undefined;
  if (type === 16) return typeof value === 'boolean' ? 1 : undefined;
  return typeof value === 'string' ? Buffer.byteLength(value) : undefined;
}

/** The array in PostgreSQL's binary format (`array_send`), or undefined when an element is not of the type. */
export function binaryArray(values: readonly unknown[], type: ElementType): Buffer | undefined {
  const sizes = new Array<number>(values.length);
  let total = values.length === 0 ? 12 : 20;
  let hasNull = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null || value === undefined) {
      hasNull = 1;
      sizes[i] = -1;
      total += 4;
      continue;
    }
    const size = elementSize(value, type);
    if (size === undefined) return undefined;
    sizes[i] = size;
    total += 4 + size;
  }
  const out = Buffer.allocUnsafe(total);
  out.writeInt32BE(values.length === 0 ? 0 : 1, 0);
  out.writeInt32BE(hasNull, 4);
  out.writeInt32BE(type, 8);
  if (values.length === 0) return out;
  out.writeInt32BE(values.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (let i = 0; i < values.length; i++) {
    const size = sizes[i]!;
    at = out.writeInt32BE(size, at);
    if (size < 0) continue;
    const value = values[i];
    if (type === 23) at = out.writeInt32BE(value as number, at);
    else if (type === 16) at = out.writeUInt8(value ? 1 : 0, at);
    else at += out.write(value as string, at);
  }
  return out;
}

/** What JSON escapes in a way a PostgreSQL array literal does not read back: control characters. */
// eslint-disable-next-line no-control-regex -- control characters are what this looks for
const CONTROL_CHARACTER = /[\u0000-\u001f]/;

/** `String.prototype.isWellFormed` (Node 20; not in TypeScript's es2023 lib): no lone surrogate, which JSON escapes. */
const wellFormed = (text: string) => (text as string & { isWellFormed(): boolean }).isWellFormed();

function sameInJson(value: unknown): boolean {
  if (value === null || value === undefined || typeof value === 'boolean') return true;
  if (typeof value === 'string') return !CONTROL_CHARACTER.test(value) && wellFormed(value);
  return typeof value === 'number' && Number.isFinite(value);
}

/** The array's literal, or undefined when node-postgres must write it (see above). */
export function arrayLiteral(values: readonly unknown[]): string | undefined {
  for (const value of values) if (!sameInJson(value)) return undefined;
  const json = JSON.stringify(values);
  return `{${json.slice(1, -1)}}`;
}

/**
 * A parameter as the engine gives it to node-postgres: undefined as null; an array in binary where `elementType` (from
 * the statement's cast, `arrayParameterTypes`) allows, else as its literal where it can.
 */
export function pgParameter(value: unknown, elementType?: ElementType): unknown {
  if (value === undefined) return null;
  if (!Array.isArray(value)) return value;
  return (elementType !== undefined ? binaryArray(value, elementType) : undefined) ?? arrayLiteral(value) ?? value;
}
