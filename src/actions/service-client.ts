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
    let response: Response;
    try {
      response = await fetch(this.urlOf(request), {
        method: request.method,
        headers: this.headersFor(request, idempotencyKey),
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
        signal: AbortSignal.timeout(this.config.serviceTimeoutMs),
      });
    } catch (error) {
      const name = (error as Error).name;
      if (name === 'TimeoutError' || name === 'AbortError') {
        return { ok: false, kind: 'timeout', code: 'timeout', message: `no answer within ${this.config.serviceTimeoutMs} ms` };
      }
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { ok: false, kind: 'network', code: 'network_error', message: cause?.message ?? (error as Error).message };
    }
    this.noteRateLimit(response);
    return this.outcomeOf(response);
  }

  private noteRateLimit(response: Response): void {
    const header = response.headers.get('x-ratelimit-remaining')?.trim();
    const remaining = header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined;
    if (remaining !== undefined) this.lastRemaining = remaining;
    // Either signal means every further call would be refused: hold them all, not just this one.
    const now = this.clock.now();
    const retryAfter = parseRetryAfter(response.headers.get('retry-after') ?? undefined, now);
    const wait = remaining === 0 ? (retryAfter ?? DEFAULT_PAUSE_MS) : response.status === 429 ? retryAfter : undefined;
    if (wait !== undefined) this.budget.pauseUntil(now.getTime() + Math.min(wait, MAX_RETRY_AFTER_MS));
  }

  private async outcomeOf(response: Response): Promise<ServiceOutcome> {
    let text = '';
    try {
      text = await response.text();
    } catch (error) {
      return { ok: false, kind: 'network', code: 'network_error', message: `answer cut off: ${(error as Error).message}` };
    }
    let body: unknown = text === '' ? null : text;
    try {
      if (text !== '') body = safeJsonParse(text);
    } catch {
      // Not JSON: keep the text, an operator may still want to read it.
    }
    if (response.ok) return { ok: true, status: response.status, body };
    const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    return {
      ok: false,
      kind: 'http',
      status: response.status,
      code: typeof error?.code === 'string' ? error.code : `http_${response.status}`,
      message: typeof error?.message === 'string' ? error.message : `the service answered ${response.status}`,
      retryAfter: response.headers.get('retry-after') ?? undefined,
    };
  }
}
