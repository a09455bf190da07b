/**
 * The few HTTP pieces the simulator needs on top of `node:http`: reading a body
 * with a size cap, parsing it as JSON, and writing answers in the service's error
 * shape `{"error":{"code","message"}}`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export type Headers = Record<string, string>;

/** What the simulator answers: a status, an optional JSON body and extra headers. */
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Headers;
  /** Already-serialised body, so an idempotent replay sends the very same bytes. */
  bodyText?: string;
}

/** Thrown by handlers and validators before they change anything. */
export class SimError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Headers = {},
  ) {
    super(message);
    this.name = 'SimError';
  }
}

export function errorAnswer(status: number, code: string, message: string, headers: Headers = {}): Answer {
  return { status, body: { error: { code, message } }, headers };
}

export function answerFromError(err: unknown): Answer {
  if (err instanceof SimError) return errorAnswer(err.status, err.code, err.message, err.headers);
  const message = err instanceof Error ? err.message : String(err);
  return errorAnswer(500, 'internal_error', `simulator error: ${message}`);
}

export const MAX_BODY_BYTES = 1024 * 1024;

export function readBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Keep draining the stream so the connection stays usable, but drop the bytes.
      if (size > maxBytes) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (tooLarge) reject(new SimError(413, 'payload_too_large', `body is larger than ${maxBytes} bytes`));
      else resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

export type ParsedBody = { ok: true; value: unknown } | { ok: false; raw: string; message: string };

/** An empty body parses as `undefined`: GET and DELETE usually send none. */
export function parseJsonBody(raw: Buffer): ParsedBody {
  const text = raw.toString('utf8');
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, raw: text, message: err instanceof Error ? err.message : 'not JSON' };
  }
}

export function bodyTextOf(answer: Answer): string | undefined {
  if (answer.bodyText !== undefined) return answer.bodyText;
  return answer.body === undefined ? undefined : JSON.stringify(answer.body);
}

export function send(res: ServerResponse, answer: Answer, extraHeaders: Headers = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = bodyTextOf(answer);
  const headers: Headers = { ...extraHeaders, ...answer.headers };
  if (text !== undefined) {
    headers['Content-Type'] = 'application/json; charset=utf-8';
    headers['Content-Length'] = String(Buffer.byteLength(text));
  }
  res.writeHead(answer.status, headers);
  res.end(text);
}

