/**
 * One HTTP exchange with the service over node:http(s) with keep-alive
 * agents. The engine sends one request per action, thousands a second under
 * load; `fetch` (undici behind web streams) costs several times more CPU per
 * request than node:http, and the service is one host, so pooled keep-alive
 * connections are the whole need.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { urlToHttpOptions } from 'node:url';

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

const agents = {
  'http:': new HttpAgent({ keepAlive: true, maxSockets: 256 }),
  'https:': new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
};

function headerOf(headers: IncomingHttpHeaders) {
  return (name: string): string | undefined => {
    const value = headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  };
}

type Target = ReturnType<typeof urlToHttpOptions>;

/** Where each URL's requests go, parsed once: most actions send to the same few (POST …/tasks). Bounded: ids make URLs many. */
const targets = new Map<string, Target>();
const MAX_TARGETS = 1_000;

function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    if (targets.size >= MAX_TARGETS) targets.clear();
    target = urlToHttpOptions(new URL(url));
    targets.set(url, target);
  }
  return target;
}

/** @throws TransportError when no complete answer came back. */
export function exchange(url: string, { method, headers, body, timeoutMs }: ExchangeOptions): Promise<Exchange> {
  const target = targetOf(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const agent = target.protocol === 'https:' ? agents['https:'] : agents['http:'];
  return new Promise((resolve, reject) => {
    const outgoing = body === undefined ? headers : { ...headers, 'Content-Length': String(Buffer.byteLength(body)) };
    const options = { protocol: target.protocol, hostname: target.hostname, port: target.port, path: target.path, auth: target.auth, method, headers: outgoing, agent };
    const req = send(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, header: headerOf(res.headers), text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (error) => reject(new TransportError('cut_off', `answer cut off: ${error.message}`)));
      res.on('aborted', () => reject(new TransportError('cut_off', 'answer cut off: the connection closed')));
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new TransportError('timeout', `no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('close', () => clearTimeout(timer));
    req.on('error', (error) => reject(new TransportError('network', error.message)));
    req.end(body);
  });
}
