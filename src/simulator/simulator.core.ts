/**
 * What one running simulator holds: the data, the logs, the fault settings, the
 * rate limiter, the idempotency store and the webhook sender, plus the timers of
 * workflow runs still "running". The HTTP layers (simulator.api.ts for /v1,
 * simulator.control.ts for /_sim) work on this object.
 */
import type { SignatureScheme } from '../intake/signature.js';
import { parseFaultSettings, SlidingWindowLimiter, type FaultSettings, type Faults } from './simulator.faults.js';
import { IdempotencyStore } from './simulator.idempotency.js';
import { Naps } from './simulator.naps.js';
import type { PendingEvent } from './simulator.routes.js';
import { SimulatorState, seedState, type WorkflowRun } from './simulator.state.js';
import { WebhookSender, createEvent, type WebhookEvent } from './simulator.webhooks.js';

export interface SimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Where signed webhooks go; undefined: none are sent (they are still logged, as `skipped`). */
  webhookUrl?: string;
  webhookSecret?: string;
  signatureScheme?: SignatureScheme;
  rateLimitPerMinute?: number;
  /** Share (0..1) of /v1 requests answered 500 at random. */
  errorRate?: number;
  latencyMs?: number;
  workflowRunDelayMs?: number;
  /** Start with a few users, projects, tasks and workflows (default true). */
  seed?: boolean;
  /** Waits before each webhook retry (default [200, 1000, 3000]). */
  webhookRetryDelaysMs?: number[];
  webhookTimeoutMs?: number;
  /** The request log keeps this many newest entries (default 10000). */
  maxLogEntries?: number;
  now?: () => Date;
  random?: () => number;
}

export interface RequestLogEntry {
  seq: number;
  time: string;
  method: string;
  path: string;
  query: Record<string, string>;
  idempotencyKey?: string;
  /** Whether an Authorization header came; its value is never kept. */
  hasAuthorization: boolean;
  keyMode?: 'live' | 'test';
  userAgent?: string;
  contentType?: string;
  body?: unknown;
  /** Set once answered. */
  status?: number;
  /** When the answer was sent (ISO-8601); absent while unanswered, and for a dropped request. */
  answeredAt?: string;
  errorCode?: string;
  fault?: 'scripted' | 'random' | 'dropped' | 'delayed';
  replayed?: boolean;
  durationMs?: number;
}

export class SimulatorCore {
  readonly state = new SimulatorState();
  readonly requests: RequestLogEntry[] = [];
  readonly idempotency = new IdempotencyStore();
  readonly limiter: SlidingWindowLimiter;
  readonly sender: WebhookSender;
  faults: Faults;
  private seq = 0;
  private readonly runTimers = new Set<NodeJS.Timeout>();
  private readonly naps = new Naps();

  constructor(private readonly options: SimulatorOptions) {
    this.limiter = new SlidingWindowLimiter(options.rateLimitPerMinute ?? 1000);
    this.faults = this.initialFaults();
    this.sender = new WebhookSender(
      {
        url: options.webhookUrl,
        secret: options.webhookSecret,
        scheme: options.signatureScheme ?? 'hmac-sha256',
        retryDelaysMs: options.webhookRetryDelaysMs ?? [200, 1000, 3000],
        timeoutMs: options.webhookTimeoutMs ?? 5000,
      },
      () => this.now(),
    );
    if (options.seed !== false) seedState(this.state, this.now());
  }

  now(): Date {
    return this.options.now?.() ?? new Date();
  }

  random(): number {
    return this.options.random?.() ?? Math.random();
  }

  private initialFaults(): Faults {
    return { errorRate: this.options.errorRate ?? 0, latencyMs: this.options.latencyMs ?? 0, script: [] };
  }

  logRequest(entry: Omit<RequestLogEntry, 'seq'>): RequestLogEntry {
    const logged = { seq: ++this.seq, ...entry };
    this.requests.push(logged);
    const max = this.options.maxLogEntries ?? 10_000;
    // Trim in batches: shifting one entry per request would cost O(n) each time.
    if (this.requests.length > max * 1.1) this.requests.splice(0, this.requests.length - max);
    return logged;
  }

  /** Validates like `POST /_sim/faults`; fields left out keep their value. */
  setFaults(settings: FaultSettings): void {
    const parsed = parseFaultSettings(settings);
    if (parsed.errorRate !== undefined) this.faults.errorRate = parsed.errorRate;
    if (parsed.latencyMs !== undefined) this.faults.latencyMs = parsed.latencyMs;
    if (parsed.script !== undefined) this.faults.script = parsed.script;
    if (parsed.rateLimitPerMinute !== undefined) this.limiter.limit = parsed.rateLimitPerMinute;
  }

  /** Back to the state right after start: seed data, empty logs, the start-up faults. */
  reset(): void {
    for (const timer of this.runTimers) clearTimeout(timer);
    this.runTimers.clear();
    this.state.clear();
    if (this.options.seed !== false) seedState(this.state, this.now());
    this.requests.length = 0;
    this.idempotency.clear();
    this.limiter.clear();
    this.limiter.limit = this.options.rateLimitPerMinute ?? 1000;
    this.faults = this.initialFaults();
    this.sender.clear();
  }

  emit(type: string, data: Record<string, unknown>): WebhookEvent {
    const event = createEvent(type, data, this.now());
    this.sender.send(event);
    return event;
  }

  emitAll(events: PendingEvent[]): void {
    for (const e of events) this.emit(e.type, e.data);
  }

  /** Completes the run after the configured delay and reports it, as the service would. */
  startRun(run: WorkflowRun): void {
    const timer = setTimeout(() => {
      this.runTimers.delete(timer);
      run.status = 'completed';
      run.completed_at = this.now().toISOString();
      this.emit('workflow.run.completed', { workflow_run: structuredClone(run) });
    }, this.options.workflowRunDelayMs ?? 50);
    this.runTimers.add(timer);
  }

  /** Nothing left to happen on its own: no running workflow run, no delivery queued. */
  get idle(): boolean {
    return this.runTimers.size === 0 && this.sender.idle;
  }

  /** A delay that `close()` cuts short, so a scripted 10 s delay cannot hold a test run open. */
  delay(ms: number): Promise<void> {
    return this.naps.sleep(ms);
  }

  close(): void {
    for (const timer of this.runTimers) clearTimeout(timer);
    this.runTimers.clear();
    this.naps.wakeAll();
    this.sender.close();
  }
}
