/**
 * Signed webhook deliveries, as the service sends them (SPEC section 4): a JSON
 * envelope `{id, type, created_at, data}` POSTed with `X-Service-Signature`.
 * Deliveries go out one at a time in the order the changes happened, so a test
 * (or the engine) sees task.updated before the task.completed of the same PATCH;
 * network errors, 408, 429 and 5xx are retried a few times.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { signBody, type SignatureScheme } from '../intake/signature.js';
import { Naps } from './simulator.naps.js';

export interface WebhookEvent {
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

export interface WebhookLogEntry {
  event: WebhookEvent;
  /** `skipped` when no webhook URL or secret is configured: nothing was sent. */
  state: 'pending' | 'delivered' | 'failed' | 'skipped';
  attempts: number;
  /** Status the receiver answered on the last attempt. */
  status?: number;
  /** Network error of the last attempt, or why nothing was sent. */
  error?: string;
  /** Start of the receiver's answer, to see why it refused a delivery. */
  response?: string;
  answeredAt?: string;
}

export interface WebhookTarget {
  url?: string;
  secret?: string;
  scheme: SignatureScheme;
  /** Waits before each retry; its length is the number of retries. */
  retryDelaysMs: number[];
  timeoutMs: number;
}

export function createEvent(type: string, data: Record<string, unknown>, now: Date): WebhookEvent {
  return { id: `evt_${randomUUID().replace(/-/g, '')}`, type, created_at: now.toISOString(), data };
}

interface PostResult {
  status: number;
  text: string;
}

function post(url: string, body: Buffer, headers: Record<string, string>, timeoutMs: number): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

const RETRYABLE = (status: number): boolean => status === 408 || status === 429 || status >= 500;

export class WebhookSender {
  readonly log: WebhookLogEntry[] = [];
  private readonly queue: WebhookLogEntry[] = [];
  private draining = false;
  private closed = false;
  private readonly naps = new Naps();
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly target: WebhookTarget,
    private readonly now: () => Date,
  ) {}

  get idle(): boolean {
    return !this.draining && this.queue.length === 0;
  }

  /** Records the event and queues its delivery; returns at once. */
  send(event: WebhookEvent): WebhookLogEntry {
    const entry: WebhookLogEntry = { event, state: 'pending', attempts: 0 };
    this.log.push(entry);
    if (this.target.url === undefined || this.target.secret === undefined) {
      entry.state = 'skipped';
      entry.error = this.target.url === undefined ? 'no webhook URL configured' : 'no webhook secret configured';
      return entry;
    }
    this.queue.push(entry);
    if (!this.draining) {
      this.draining = true;
      // After the current tick, so the API answer that caused the event goes out first.
      setImmediate(() => void this.drain());
    }
    return entry;
  }

  /** Where deliveries go from now on; one already on the wire finishes where it was going. */
  sendTo(url: string): void {
    this.target.url = url;
  }

  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Forgets queued deliveries (reset); one already on the wire still finishes. */
  clear(): void {
    this.queue.length = 0;
    this.log.length = 0;
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.naps.wakeAll();
  }

  private async drain(): Promise<void> {
    while (!this.closed && this.queue.length > 0) {
      const entry = this.queue.shift() as WebhookLogEntry;
      await this.deliver(entry);
    }
    this.draining = false;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private async deliver(entry: WebhookLogEntry): Promise<void> {
    const body = Buffer.from(JSON.stringify(entry.event));
    for (let attempt = 0; attempt <= this.target.retryDelaysMs.length && !this.closed; attempt++) {
      if (attempt > 0) await this.naps.sleep(this.target.retryDelaysMs[attempt - 1]);
      if (this.closed) break;
      entry.attempts = attempt + 1;
      if ((await this.attempt(entry, body)) === 'done') return;
    }
    entry.state = 'failed';
  }

  /** One POST; the entry stays `pending` while a retry is still to come. */
  private async attempt(entry: WebhookLogEntry, body: Buffer): Promise<'done' | 'retry'> {
    const { url, secret, scheme, timeoutMs } = this.target;
    const headers = {
      'Content-Type': 'application/json',
      'Content-Length': String(body.length),
      'User-Agent': 'service-simulator/1.0',
      // Signed per attempt: a `timestamped` signature must be fresh on a retry.
      'X-Service-Signature': signBody(body, secret as string, scheme, this.now()),
    };
    try {
      const result = await post(url as string, body, headers, timeoutMs);
      Object.assign(entry, { status: result.status, response: result.text.slice(0, 500), error: undefined });
      entry.answeredAt = this.now().toISOString();
      if (result.status >= 200 && result.status < 300) entry.state = 'delivered';
      else if (!RETRYABLE(result.status)) entry.state = 'failed';
      return entry.state === 'pending' ? 'retry' : 'done';
    } catch (err) {
      Object.assign(entry, { status: undefined, error: err instanceof Error ? err.message : String(err) });
      entry.answeredAt = this.now().toISOString();
      return 'retry';
    }
  }
}
