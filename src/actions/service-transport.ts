/**
 * One HTTP exchange with the service, through undici's dispatcher with
 * keep-alive connections: the engine sends one request per action, thousands
 * a second under load, to one host. undici's `dispatch` with a handler of its
 * own callbacks (the handler undici's core calls; its newer interface is a
 * wrapper over it that parses every answer's headers) costs about a third less
 * CPU per request than node:http with a keep-alive agent (whose `addRequest`
 * alone copies the request's options and its own into a new object, property
 * by property, on every request), and much less than `fetch` (undici behind
 * web streams).
 */
import type { Dispatcher } from 'undici';
import Agent from 'undici/lib/dispatcher/agent.js';

export interface Exchange {
  status: number;
  header(name: string): string | undefined;
  text: string;
}

/** Why no answer came: no connection (or it broke), no answer in time, or the answer was cut off. */
export class TransportError extends Error {
  constructor(
    readonly kind: 'network' | 'timeout' | 'cut_off',
    message: string,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

export interface ExchangeOptions {
  method: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
}

/** As many connections per origin as actions in flight can use (workers.ts); idle ones kept for the next requests. */
const dispatcher = new Agent({ connections: 256 });

/**
 * A header of the answer by name, read from undici's raw list (name, value, …) only when asked. A name of another
 * length is passed over without being made a string (three lookups an answer, most of them for headers it lacks).
 */
function headerOf(raw: Buffer[]) {
  return (name: string): string | undefined => {
    const wanted = name.toLowerCase();
    const values: string[] = [];
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (raw[i].length === wanted.length && raw[i].toString('latin1').toLowerCase() === wanted) values.push(raw[i + 1].toString('latin1'));
    }
    return values.length === 0 ? undefined : values.join(', ');
  };
}

interface Target {
  origin: string;
  path: string;
}

/** Where each URL's requests go, parsed once: most actions send to the same few (POST …/tasks). Bounded: ids make URLs many. */
const targets = new Map<string, Target>();
const MAX_TARGETS = 1_000;

function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    if (targets.size >= MAX_TARGETS) targets.clear();
    const parsed = new URL(url);
    target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
    targets.set(url, target);
  }
  return target;
}

/**
 * The callbacks undici calls for one exchange: the answer, collected, or why there is none. Settles once: an error
 * after the timeout (the abort it caused) changes nothing.
 */
class AnswerHandler implements Dispatcher.DispatchHandler {
  private abortRequest: ((error: Error) => void) | undefined;
  private status = 0;
  private raw: Buffer[] = [];
  private readonly chunks: Buffer[] = [];
  private settled = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly resolve: (exchange: Exchange) => void,
    private readonly reject: (error: TransportError) => void,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      this.fail(new TransportError('timeout', `no answer within ${timeoutMs} ms`));
      this.abortRequest?.(new Error('timed out'));
    }, timeoutMs);
  }

  onConnect(abort: (error: Error) => void): void {
    this.abortRequest = abort;
    if (this.settled) abort(new Error('timed out'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx: informational, the answer is still to come.
    if (statusCode >= 200) {
      this.status = statusCode;
      this.raw = rawHeaders;
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.settle()) this.resolve({ status: this.status, header: headerOf(this.raw), text: Buffer.concat(this.chunks).toString('utf8') });
  }

  onError(error: Error): void {
    this.fail(this.status === 0 ? new TransportError('network', error.message) : new TransportError('cut_off', `answer cut off: ${error.message}`));
  }

  private fail(error: TransportError): void {
    if (this.settle()) this.reject(error);
  }

  /** True the first time only. */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    return true;
  }
}

/** @throws TransportError when no complete answer came back. */
export function exchange(url: string, { method, headers, body, timeoutMs }: ExchangeOptions): Promise<Exchange> {
  const { origin, path } = targetOf(url);
  return new Promise((resolve, reject) => {
    // Its own timer, not undici's headersTimeout/bodyTimeout: SERVICE_TIMEOUT_MS bounds the whole exchange.
    const handler = new AnswerHandler(resolve, reject, timeoutMs);
    dispatcher.dispatch({ origin, path, method: method as Dispatcher.HttpMethod, headers, body: body ?? null, headersTimeout: 0, bodyTimeout: 0 }, handler);
  });
}
