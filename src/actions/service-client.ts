/**
 * The one client for the service's REST API: headers, timeout, the shared rate
 * budget and the mapping of answers to outcomes. It never retries by itself;
 * retry decisions belong to the action runner, which persists them.
 */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { safeJsonParse } from '../json.js';
import { ENGINE_VERSION } from '../version.js';
import { exchange, TransportError, type Exchange } from './service-transport.js';
import { DEFAULT_PAUSE_MS, RateBudget } from './rate-budget.js';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from './retry-policy.js';
import type { ServiceRequest } from './service-operations.js';

export const USER_AGENT = `automation-engine/${ENGINE_VERSION}`;

export type ServiceOutcome =
  | { ok: true; status: number; body: unknown }
  | { ok: false; kind: 'http'; status: number; code: string; message: string; retryAfter?: string }
  | { ok: false; kind: 'network' | 'timeout'; code: string; message: string };

@Injectable()
export class ServiceClient {
  readonly budget: RateBudget;
  /** The last X-RateLimit-Remaining the service sent (for metrics). */
  lastRemaining: number | undefined;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.budget = new RateBudget({ limitPerMinute: config.rateLimitPerMinute, clock: () => clock.now().getTime() });
  }

  get hasKey(): boolean {
    return this.config.serviceApiKey !== undefined;
  }

  urlOf(request: ServiceRequest): string {
    const query = request.query ? `?${new URLSearchParams(request.query).toString()}` : '';
    return `${this.config.serviceApiUrl}${request.path}${query}`;
  }

  headersFor(request: ServiceRequest, idempotencyKey?: string): Record<string, string> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.config.serviceApiKey ?? ''}`,
      'Content-Type': 'application/json',
      Accept: 'application/json',
      'User-Agent': USER_AGENT,
    };
    if (idempotencyKey !== undefined && request.method !== 'GET') headers['Idempotency-Key'] = idempotencyKey;
    return headers;
  }

  async send(request: ServiceRequest, idempotencyKey?: string): Promise<ServiceOutcome> {
    await this.budget.acquire();
    let answer: Exchange;
    try {
      answer = await exchange(this.urlOf(request), {
        method: request.method,
        headers: this.headersFor(request, idempotencyKey),
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
        timeoutMs: this.config.serviceTimeoutMs,
      });
    } catch (error) {
      if (!(error instanceof TransportError)) throw error;
      // Headers may have come before the answer was cut off; a hold they asked for cannot be read now.
      return { ok: false, kind: error.kind === 'timeout' ? 'timeout' : 'network', code: error.kind === 'timeout' ? 'timeout' : 'network_error', message: error.message };
    }
    this.noteRateLimit(answer);
    return outcomeOf(answer);
  }

  private noteRateLimit(answer: Exchange): void {
    const header = answer.header('x-ratelimit-remaining')?.trim();
    const remaining = header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined;
    if (remaining !== undefined) this.lastRemaining = remaining;
    // Either signal means every further call would be refused: hold them all, not just this one.
    const now = this.clock.now();
    const retryAfter = parseRetryAfter(answer.header('retry-after'), now);
    const wait = remaining === 0 ? (retryAfter ?? DEFAULT_PAUSE_MS) : answer.status === 429 ? retryAfter : undefined;
    if (wait !== undefined) this.budget.pauseUntil(now.getTime() + Math.min(wait, MAX_RETRY_AFTER_MS));
  }
}

function outcomeOf(answer: Exchange): ServiceOutcome {
  let body: unknown = answer.text === '' ? null : answer.text;
  try {
    if (answer.text !== '') body = safeJsonParse(answer.text);
  } catch {
    // Not JSON: keep the text, an operator may still want to read it.
  }
  if (answer.status >= 200 && answer.status < 300) return { ok: true, status: answer.status, body };
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return {
    ok: false,
    kind: 'http',
    status: answer.status,
    code: typeof error?.code === 'string' ? error.code : `http_${answer.status}`,
    message: typeof error?.message === 'string' ? error.message : `the service answered ${answer.status}`,
    retryAfter: answer.header('retry-after'),
  };
}
