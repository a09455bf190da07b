/**
 * The /v1 request pipeline, in the order a real service would apply it: rate
 * limit, authentication, injected latency and faults, body parsing, routing,
 * idempotency, then the operation itself. Every step before the operation answers
 * without touching the state, which is what makes injected failures side-effect free.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestLogEntry, SimulatorCore } from './simulator.core.js';
import { defaultErrorCode, takeScripted, type RateDecision, type ScriptEntry } from './simulator.faults.js';
import {
  answerFromError, errorAnswer, parseJsonBody, readBody, send, type Answer, type Headers, type ParsedBody,
} from './simulator.http.js';
import { fingerprintOf } from './simulator.idempotency.js';
import { matchRoute, type RouteMatch } from './simulator.routes.js';

type Outcome = { answer: Answer; after?: () => void } | 'drop';

interface ApiRequest {
  method: string;
  url: URL;
  body: ParsedBody | Error;
  token?: string;
  rate: RateDecision;
  idempotencyKey?: string;
  log: RequestLogEntry;
}

const BEARER = /^Bearer\s+(ac_(live|test)_\S+)$/;
const WRITES = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export async function handleApi(core: SimulatorCore, req: IncomingMessage, res: ServerResponse, url: URL) {
  const started = performance.now();
  const method = (req.method ?? 'GET').toUpperCase();
  const body = await readBody(req).then(parseJsonBody, (err: Error) => err);
  const auth = BEARER.exec(header(req, 'authorization')?.trim() ?? '');
  // Counted per key; requests without a valid key share one anonymous budget.
  const rate = core.limiter.take(auth?.[1] ?? 'anonymous', core.now().getTime());
  const log = core.logRequest({
    time: core.now().toISOString(),
    method,
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    idempotencyKey: header(req, 'idempotency-key'),
    hasAuthorization: header(req, 'authorization') !== undefined,
    keyMode: auth ? (auth[2] as 'live' | 'test') : undefined,
    userAgent: header(req, 'user-agent'),
    contentType: header(req, 'content-type'),
    body: body instanceof Error ? undefined : body.ok ? body.value : body.raw,
  });
  const request: ApiRequest = { method, url, body, token: auth?.[1], rate, idempotencyKey: log.idempotencyKey, log };
  const outcome = await answer(core, request).catch((err: unknown): Outcome => ({ answer: answerFromError(err) }));
  log.durationMs = Math.round(performance.now() - started);
  if (outcome === 'drop') {
    log.fault = 'dropped';
    res.socket?.destroy();
    return;
  }
  log.answeredAt = core.now().toISOString();
  send(res, outcome.answer, rateHeaders(rate));
  log.status = outcome.answer.status;
  log.errorCode = (outcome.answer.body as { error?: { code?: string } } | undefined)?.error?.code;
  // Only now: webhooks and run completions follow the answer, as they would at the service.
  outcome.after?.();
}

function rateHeaders(rate: RateDecision): Headers {
  return { 'X-RateLimit-Limit': String(rate.limit), 'X-RateLimit-Remaining': String(rate.remaining) };
}

async function answer(core: SimulatorCore, r: ApiRequest): Promise<Outcome> {
  if (r.body instanceof Error) return { answer: answerFromError(r.body) };
  if (!r.rate.allowed) {
    const retryAfter = String(r.rate.retryAfterSeconds ?? 60);
    const message = `rate limit of ${r.rate.limit} requests per minute exceeded; retry in ${retryAfter} s`;
    return { answer: errorAnswer(429, 'rate_limited', message, { 'Retry-After': retryAfter }) };
  }
  if (r.token === undefined) {
    return { answer: errorAnswer(401, 'unauthorized', 'Authorization: Bearer ac_live_… or ac_test_… is required') };
  }
  await core.delay(core.faults.latencyMs);
  const scripted = takeScripted(core.faults.script, r.method, r.url.pathname);
  if (scripted) {
    const outcome = await scriptedOutcome(core, scripted, r.log);
    if (outcome) return outcome;
  }
  if (core.faults.errorRate > 0 && core.random() < core.faults.errorRate) {
    r.log.fault = 'random';
    return { answer: errorAnswer(500, 'internal_error', 'injected failure (error rate)') };
  }
  if (!r.body.ok) return { answer: errorAnswer(400, 'invalid_json', `body is not valid JSON: ${r.body.message}`) };
  const match = matchRoute(r.method, r.url.pathname);
  if (!match) return { answer: errorAnswer(404, 'not_found', `no route for ${r.method} ${r.url.pathname}`) };
  return runRoute(core, r, match, r.body.value);
}

async function scriptedOutcome(core: SimulatorCore, e: ScriptEntry, log: RequestLogEntry): Promise<Outcome | undefined> {
  await core.delay(e.delayMs ?? 0);
  if (e.dropConnection) return 'drop';
  if (e.status === undefined) {
    log.fault = 'delayed';
    return undefined; // a pure delay: the request then runs normally
  }
  log.fault = 'scripted';
  const headers: Headers = {};
  if (e.retryAfter !== undefined) headers['Retry-After'] = String(e.retryAfter);
  if (e.status === 429) headers['X-RateLimit-Remaining'] = '0';
  if (e.status < 400) return { answer: { status: e.status, body: {}, headers } };
  const message = e.message ?? `scripted ${e.status} answer`;
  return { answer: errorAnswer(e.status, e.code ?? defaultErrorCode(e.status), message, headers) };
}

function runRoute(core: SimulatorCore, r: ApiRequest, match: RouteMatch, body: unknown): Outcome {
  const key = WRITES.has(r.method) ? r.idempotencyKey : undefined;
  const scope = r.token as string;
  const fingerprint = fingerprintOf(r.method, r.url.pathname, body);
  if (key !== undefined) {
    const seen = core.idempotency.lookup(scope, key, fingerprint);
    if (seen.kind === 'replay') {
      r.log.replayed = true;
      return { answer: { ...seen.answer, headers: { 'Idempotent-Replayed': 'true' } } };
    }
    if (seen.kind === 'mismatch') {
      const message = `Idempotency-Key ${key} was already used for a different request`;
      return { answer: errorAnswer(422, 'idempotency_key_reused', message) };
    }
  }
  const ctx = { state: core.state, params: match.params, query: r.url.searchParams, body, now: core.now() };
  const result = match.handle(ctx);
  const bodyText = JSON.stringify(result.body);
  if (key !== undefined && result.status < 300) {
    core.idempotency.record(scope, key, fingerprint, result.status, bodyText);
  }
  const after = (): void => {
    core.emitAll(result.events ?? []);
    if (result.startedRun) core.startRun(result.startedRun);
  };
  return { answer: { status: result.status, bodyText }, after };
}
