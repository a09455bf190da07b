/**
 * The one client for the service's REST API: headers, timeout, the shared rate
 * budget and the mapping of answers to outcomes. It never retries by itself;
 * retry decisions belong to the action runner, which persists them.
 *
 * The budget is this process's own (rate-budget.ts) until the action runner
 * gives it the one replicas share on PostgreSQL (shared-rate-budget.ts). An
 * action attempt does not wait for it: the runner takes a slot with
 * `takeSlot()` and hands the run back to the database when none is free
 * (processing/budget-wait.ts). A lookup waits for its slot here, at most
 * `lookupWaitMs`, so that it cannot outlast the event lease it runs under.
 */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { safeJsonParse } from '../json.js';
import { ENGINE_VERSION } from '../version.js';
import { exchange, TransportError, type Exchange } from './service-transport.js';
import { BudgetWaitTooLong, DEFAULT_PAUSE_MS, RateBudget, type Budget } from './rate-budget.js';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from './retry-policy.js';
import type { ServiceRequest } from './service-operations.js';

export const USER_AGENT = `automation-engine/${ENGINE_VERSION}`;

/**
 * The longest a lookup waits for the budget. Lookups run while an event is
 * evaluated under a 15 s lease (processing/work-queue.ts), and the request
 * itself may take SERVICE_TIMEOUT_MS more: a longer wait fails the lookup, and
 * the event is evaluated again later, like after any failed lookup.
 */
export const LOOKUP_WAIT_MS = 3_000;

export type ServiceOutcome =
  /** `bodyJson`: the answer's text as received, when it was JSON (`body` is then what it parsed to). */
  | { ok: true; status: number; body: unknown; bodyJson?: string }
  | { ok: false; kind: 'http'; status: number; code: string; message: string; retryAfter?: string }
  | { ok: false; kind: 'network' | 'timeout'; code: string; message: string };

@Injectable()
export class ServiceClient {
  private shared: Budget;
  /** The last X-RateLimit-Remaining the service sent (for metrics). */
  lastRemaining: number | undefined;
  lookupWaitMs = LOOKUP_WAIT_MS;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.shared = new RateBudget({ limitPerMinute: config.rateLimitPerMinute, clock: () => clock.now().getTime() });
  }

  get budget(): Budget {
    return this.shared;
  }

  /** From now on every call counts against `budget` (the replicas' shared one). */
  useBudget(budget: Budget): void {
    this.shared = budget;
  }

  /** Takes a slot for an action attempt without waiting: 0 when taken, else ms until one may be free. */
  takeSlot(): Promise<number> {
    return this.shared.take();
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

  /**
   * Sends one request. A request with an Idempotency-Key is an action attempt,
   * whose slot of the budget the caller has just taken (`takeSlot`); any other
   * (a lookup) waits for its slot here, at most `lookupWaitMs`.
   */
  async send(request: ServiceRequest, idempotencyKey?: string): Promise<ServiceOutcome> {
    if (idempotencyKey === undefined) {
      const refused = await this.waitForSlot();
      if (refused) return refused;
    }
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

  /** Undefined once a slot is taken; the outcome to report when the wait would be too long (nothing was sent). */
  private async waitForSlot(): Promise<ServiceOutcome | undefined> {
    try {
      await this.shared.acquire(undefined, this.lookupWaitMs);
      return undefined;
    } catch (error) {
      if (!(error instanceof BudgetWaitTooLong)) throw error;
      // A timeout of the wait, not of the service: reported as such, and the event waits like after any failed lookup.
      return { ok: false, kind: 'timeout', code: 'rate_budget_wait', message: `not sent: ${error.message}, longer than a lookup may wait (${this.lookupWaitMs} ms)` };
    }
  }

  private noteRateLimit(answer: Exchange): void {
    const header = answer.header('x-ratelimit-remaining')?.trim();
    const remaining = header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined;
    if (remaining !== undefined) this.lastRemaining = remaining;
    // Either signal means every further call would be refused: hold them all, not just this one.
    const now = this.clock.now();
    const retryAfter = parseRetryAfter(answer.header('retry-after'), now);
    const wait = remaining === 0 ? (retryAfter ?? DEFAULT_PAUSE_MS) : answer.status === 429 ? retryAfter : undefined;
    if (wait !== undefined) this.shared.pauseFor(Math.min(wait, MAX_RETRY_AFTER_MS));
  }
}

function outcomeOf(answer: Exchange): ServiceOutcome {
  let body: unknown = answer.text === '' ? null : answer.text;
  let json = false;
  try {
    if (answer.text !== '') {
      body = safeJsonParse(answer.text);
      json = true;
    }
  } catch {
    // Not JSON: keep the text, an operator may still want to read it.
  }
  if (answer.status >= 200 && answer.status < 300) return { ok: true, status: answer.status, body, bodyJson: json ? answer.text : undefined };
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
