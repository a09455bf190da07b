/** Request bodies as raw bytes (signatures are computed over them), with the size limit enforced while reading. */
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { DomainError } from '../errors.js';

/** Reads the body as raw bytes, refusing it as soon as it is known to exceed the limit. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(req, { limit, length: req.headers['content-length'] });
  } catch (error) {
    const type = (error as { type?: string }).type;
    if (type === 'entity.too.large') {
      throw new DomainError('payload_too_large', `body is larger than ${limit} bytes (WEBHOOK_MAX_BYTES)`);
    }
    throw new DomainError('bad_request', `could not read the request body: ${(error as Error).message}`);
  }
}
