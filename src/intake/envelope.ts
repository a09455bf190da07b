/**
 * The event envelope (SPEC section 4), parsed from the raw body without letting
 * `__proto__` or `constructor.prototype` keys reach any object's prototype.
 */
import { scopeOfEvent, type CausalScope } from '../causal-scope.js';
import { createHash } from 'node:crypto';
import { isObject, safeJsonParse } from '../json.js';

export interface EventEnvelope {
  id: string;
  type: string;
  created_at?: string;
  data: Record<string, unknown>;
  [key: string]: unknown;
}

export type EnvelopeResult =
  /** `text`: the body as read (UTF-8), which intake stores as the event's payload. */
  | { ok: true; envelope: EventEnvelope; resourceKey: string | null; scope: CausalScope | null; text: string }
  | { ok: false; code: 'invalid_json' | 'invalid_event'; message: string };

const MAX_ID = 255;
/** Real events nest a few levels; far deeper nesting only exhausts stacks further down the line. */
export const MAX_NESTING = 64;
const MAX_TYPE = 200;
/** The kinds of resource an event can be about, in the order they are looked for. */
const RESOURCE_KINDS = ['task', 'project', 'user', 'workflow_run', 'workflow'];

export function resourceKeyOf(data: Record<string, unknown>): string | null {
  for (const kind of RESOURCE_KINDS) {
    const resource = data[kind];
    if (isObject(resource) && (typeof resource.id === 'string' || typeof resource.id === 'number')) {
      return `${kind}:${String(resource.id)}`.slice(0, 300);
    }
  }
  return null;
}

/** How deeply arrays and objects nest in JSON text, counted without recursion and without parsing. */
export function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91 /* { [ */) deepest = Math.max(deepest, ++depth);
    else if (c === 125 || c === 93 /* } ] */) depth--;
  }
  return deepest;
}

/**
 * Whether the text opens at most `limit` objects and arrays, brackets inside strings counted too: then it cannot nest
 * deeper than that. A native search per bracket, where `nestingDepth` reads every character in JavaScript (2 % of
 * intake's instructions when it ran for every webhook, whose few dozen brackets make this the answer almost always).
 */
export function opensAtMost(text: string, limit: number): boolean {
  let opened = 0;
  for (const bracket of ['{', '[']) {
    for (let at = text.indexOf(bracket); at !== -1; at = text.indexOf(bracket, at + 1)) {
      if (++opened > limit) return false;
    }
  }
  return true;
}

export function parseEnvelope(rawBody: Buffer): EnvelopeResult {
  let parsed: unknown;
  const text = rawBody.toString('utf8');
  if (!opensAtMost(text, MAX_NESTING) && nestingDepth(text) > MAX_NESTING) {
    return { ok: false, code: 'invalid_event', message: `event nests deeper than ${MAX_NESTING} levels` };
  }
  try {
    parsed = safeJsonParse(text);
  } catch (error) {
    return { ok: false, code: 'invalid_json', message: `body is not valid JSON: ${(error as Error).message}` };
  }
  if (!isObject(parsed)) return { ok: false, code: 'invalid_event', message: 'event must be a JSON object' };
  const { type, id, data } = parsed;
  if (typeof type !== 'string' || type.trim() === '') {
    return { ok: false, code: 'invalid_event', message: 'event.type is required and must be a non-empty string' };
  }
  if (type.length > MAX_TYPE) return { ok: false, code: 'invalid_event', message: `event.type is longer than ${MAX_TYPE} characters` };
  if (id !== undefined && (typeof id !== 'string' || id === '' || id.length > MAX_ID)) {
    return { ok: false, code: 'invalid_event', message: `event.id must be a non-empty string of at most ${MAX_ID} characters` };
  }
  if (data !== undefined && !isObject(data)) {
    return { ok: false, code: 'invalid_event', message: 'event.data must be an object' };
  }
  // `parsed` is this call's own: completed in place (as a copy would have it: keys in the sender's order, the
  // missing ones after), not copied, for every webhook.
  const envelope = parsed as unknown as EventEnvelope;
  envelope.id = typeof id === 'string' ? id : createHash('sha256').update(rawBody).digest('hex');
  envelope.type = type;
  envelope.data = (data as Record<string, unknown> | undefined) ?? {};
  const resourceKey = resourceKeyOf(envelope.data);
  return { ok: true, envelope, resourceKey, scope: scopeOfEvent(resourceKey, envelope.data), text };
}
