import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DomainError } from '../errors.js';
import { readBody } from './body.js';

/** What `readBody` made of each request the server got: the body's bytes, or the error's code and message. */
type Read = { body: Buffer } | { code: string; message: string };

let server: Server;
let port: number;
let reads: Array<Promise<Read>>;
const LIMIT = 64;

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    const read = readBody(req, LIMIT).then(
      (body): Read => ({ body }),
      (error: unknown): Read => {
        if (!(error instanceof DomainError)) throw error;
        return { code: error.code, message: error.message };
      },
    );
    reads.push(read);
    void read.then((result) => {
      if ('code' in result) res.setHeader('Connection', 'close');
      res.writeHead('code' in result ? 400 : 200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

beforeEach(() => {
  reads = [];
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends the chunks as a request (chunked unless a Content-Length is given), and waits for what was read. */
async function send(chunks: string[], headers: Record<string, string> = {}, abortAfterFirst = false): Promise<Read> {
  const req = request({ port, host: '127.0.0.1', method: 'POST', path: '/', headers });
  req.on('error', () => undefined);
  req.on('response', (res) => res.resume());
  for (const chunk of chunks) req.write(chunk);
  if (abortAfterFirst) {
    // Only once the server is reading: an abort before the request's head arrived would never reach it.
    while (reads.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    req.destroy();
  } else req.end();
  while (reads.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  return reads[0]!;
}

describe(readBody.name, () => {
  it('reads a body sent in pieces as the bytes sent', async () => {
    const read = await send(['{"a":', '"é"}']);
    expect(read).toEqual({ body: Buffer.from('{"a":"é"}') });
  });

  it('reads a body with a Content-Length, and an empty one', async () => {
    expect(await send(['[1,2]'], { 'Content-Length': '5' })).toEqual({ body: Buffer.from('[1,2]') });
    reads = [];
    expect(await send([], { 'Content-Length': '0' })).toEqual({ body: Buffer.alloc(0) });
  });

  it('takes a body of exactly the limit', async () => {
    const read = await send(['x'.repeat(LIMIT)]);
    expect(read).toEqual({ body: Buffer.from('x'.repeat(LIMIT)) });
  });

  it('refuses a declared length over the limit before reading it', async () => {
    const read = await send(['x'.repeat(LIMIT + 1)], { 'Content-Length': String(LIMIT + 1) });
    expect(read).toEqual({ code: 'payload_too_large', message: `body is larger than ${LIMIT} bytes (WEBHOOK_MAX_BYTES)` });
  });

  it('refuses a chunked body as soon as it grows past the limit', async () => {
    const read = await send(['x'.repeat(LIMIT), 'y']);
    expect(read).toMatchObject({ code: 'payload_too_large' });
  });

  it('calls a body cut off by its sender a bad request', async () => {
    const read = await send(['{"partial":'], { 'Content-Length': '50' }, true);
    expect(read).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/^could not read the request body: /) });
  });
});
