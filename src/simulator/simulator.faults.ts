/**
 * Fault injection and the rate limit: the parts of the simulator that make the
 * engine's retry, backoff and budget logic observable in tests. Scripted answers
 * are a queue: each /v1 request takes the first entry that matches it.
 */
import { isObject } from '../json.js';
import { SimError } from './simulator.http.js';

export interface ScriptEntry {
  /** Status to answer with; absent means "delay, then answer normally". */
  status?: number;
  /** How many matching requests this entry answers (default 1). */
  count?: number;
  /** Seconds, sent as `Retry-After`. */
  retryAfter?: number;
  code?: string;
  message?: string;
  delayMs?: number;
  method?: string;
  /** `/tasks` or `/v1/tasks`: both mean the same. */
  pathPrefix?: string;
  /** Close the connection without answering, as a network error would. */
  dropConnection?: boolean;
}

export interface Faults {
  errorRate: number;
  latencyMs: number;
  script: ScriptEntry[];
}

export interface FaultSettings extends Partial<Faults> {
  rateLimitPerMinute?: number;
}

const DEFAULT_CODES: Record<number, string> = {
  400: 'validation_failed', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found',
  408: 'request_timeout', 409: 'conflict', 422: 'unprocessable_entity', 425: 'too_early',
  429: 'rate_limited', 500: 'internal_error', 502: 'bad_gateway', 503: 'service_unavailable',
  504: 'gateway_timeout',
};

export function defaultErrorCode(status: number): string {
  return DEFAULT_CODES[status] ?? (status >= 500 ? 'internal_error' : 'bad_request');
}

function invalid(message: string): never {
  throw new SimError(400, 'validation_failed', message);
}

function num(value: unknown, field: string, min: number, max: number, whole = true): number | undefined {
  if (value === undefined) return undefined;
  const ok = typeof value === 'number' && value >= min && value <= max && (!whole || Number.isInteger(value));
  if (!ok) invalid(`${field} must be a ${whole ? 'whole ' : ''}number from ${min} to ${max}`);
  return value as number;
}

function str(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') invalid(`${field} must be a non-empty string`);
  return value as string;
}

function parseEntry(raw: unknown, at: string): ScriptEntry {
  if (!isObject(raw)) invalid(`${at} must be an object`);
  const entry: ScriptEntry = {
    status: num(raw.status, `${at}.status`, 200, 599),
    count: num(raw.count, `${at}.count`, 1, 1_000_000) ?? 1,
    retryAfter: num(raw.retryAfter, `${at}.retryAfter`, 0, 86_400),
    code: str(raw.code, `${at}.code`),
    message: str(raw.message, `${at}.message`),
    delayMs: num(raw.delayMs, `${at}.delayMs`, 0, 600_000),
    method: str(raw.method, `${at}.method`)?.toUpperCase(),
    pathPrefix: normalisePrefix(str(raw.pathPrefix, `${at}.pathPrefix`)),
  };
  if (raw.dropConnection !== undefined && typeof raw.dropConnection !== 'boolean') {
    invalid(`${at}.dropConnection must be true or false`);
  }
  if (raw.dropConnection === true) entry.dropConnection = true;
  if (entry.status === undefined && entry.delayMs === undefined && !entry.dropConnection) {
    invalid(`${at} needs a status, a delayMs or dropConnection`);
  }
  return entry;
}

function normalisePrefix(prefix: string | undefined): string | undefined {
  if (prefix === undefined) return undefined;
  const withSlash = prefix.startsWith('/') ? prefix : `/${prefix}`;
  return withSlash === '/v1' || withSlash.startsWith('/v1/') ? withSlash : `/v1${withSlash}`;
}

/** Validates a body of `POST /_sim/faults` (or an argument of `setFaults`). */
export function parseFaultSettings(raw: unknown): FaultSettings {
  if (!isObject(raw)) invalid('faults must be a JSON object');
  const settings: FaultSettings = {};
  const errorRate = num(raw.errorRate, 'errorRate', 0, 1, false);
  const latencyMs = num(raw.latencyMs, 'latencyMs', 0, 600_000);
  const rate = num(raw.rateLimitPerMinute, 'rateLimitPerMinute', 1, 10_000_000);
  if (errorRate !== undefined) settings.errorRate = errorRate;
  if (latencyMs !== undefined) settings.latencyMs = latencyMs;
  if (rate !== undefined) settings.rateLimitPerMinute = rate;
  if (raw.script !== undefined) {
    if (!Array.isArray(raw.script)) invalid('script must be an array');
    settings.script = (raw.script as unknown[]).map((entry, i) => parseEntry(entry, `script[${i}]`));
  }
  return settings;
}

/** Takes one use of the first entry matching the request; spent entries leave the queue. */
export function takeScripted(script: ScriptEntry[], method: string, path: string): ScriptEntry | undefined {
  const index = script.findIndex(
    (e) => (e.method === undefined || e.method === method) && (e.pathPrefix === undefined || path.startsWith(e.pathPrefix)),
  );
  if (index < 0) return undefined;
  const entry = script[index];
  entry.count = (entry.count ?? 1) - 1;
  if (entry.count <= 0) script.splice(index, 1);
  return entry;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window; only when refused. */
  retryAfterSeconds?: number;
}

/** A sliding 60 s window per key: a request counts for exactly 60 s after it was accepted. */
export class SlidingWindowLimiter {
  private readonly hits = new Map<string, number[]>();

  constructor(
    public limit: number,
    private readonly windowMs = 60_000,
  ) {}

  take(key: string, nowMs: number): RateDecision {
    const hits = this.hits.get(key) ?? [];
    this.hits.set(key, hits);
    while (hits.length > 0 && hits[0] <= nowMs - this.windowMs) hits.shift();
    if (hits.length >= this.limit) {
      const wait = hits[hits.length - this.limit] + this.windowMs - nowMs;
      return { allowed: false, limit: this.limit, remaining: 0, retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)) };
    }
    hits.push(nowMs);
    return { allowed: true, limit: this.limit, remaining: this.limit - hits.length };
  }

  clear(): void {
    this.hits.clear();
  }
}
