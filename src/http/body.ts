/**
 * Request bodies as raw bytes (signatures are computed over them), with the
 * size limit enforced while reading.
 *
 * Hand-written rather than raw-body (which Express still uses for its own
 * parsers): every webhook is read here, and raw-body's generality (an async
 * resource per body, five listeners added and removed, decoders) was 3 % of
 * intake's instructions. What it checked is checked here too: a declared
 * length over the limit is refused before a byte is read, a body that grows
 * past it as soon as it does, one cut off or shorter than declared is a bad
 * request, and an error ends the reading with that error.
 */
import type { IncomingMessage } from 'node:http';
import { DomainError } from '../errors.js';

function tooLarge(limit: number): DomainError {
  return new DomainError('payload_too_large', `body is larger than ${limit} bytes (WEBHOOK_MAX_BYTES)`);
}

function unreadable(reason: string): DomainError {
  return new DomainError('bad_request', `could not read the request body: ${reason}`);
}

/** Reads the body as raw bytes, refusing it as soon as it is known to exceed the limit. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const header = req.headers['content-length'];
  const declared = header === undefined ? undefined : Number(header);
  // node:http has already refused a Content-Length that is not a number; the request is left unread.
  if (declared !== undefined && declared > limit) return Promise.reject(tooLarge(limit));
  if (!req.readable) return Promise.reject(unreadable('it was read already'));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    // Once settled, the events that may still come (the rest of a body too large, `close` after `end`, which every
    // request has) are ignored, their error not even made; the listeners go with the request.
    const fail = (error: () => DomainError) => {
      if (settled) return;
      settled = true;
      req.pause();
      reject(error());
    };
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      received += chunk.length;
      if (received > limit) fail(() => tooLarge(limit));
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (settled) return;
      if (declared !== undefined && received !== declared) return fail(() => unreadable(`received ${received} bytes of the ${declared} declared`));
      settled = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    });
    req.on('error', (error) => fail(() => unreadable(error.message)));
    req.on('close', () => fail(() => unreadable('request aborted')));
  });
}
