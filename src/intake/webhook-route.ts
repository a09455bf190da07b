/**
 * POST /webhooks served straight from node:http, in front of Express and Nest.
 * It is the one route every event pays for, thousands of times a second, and
 * Express's router, Nest's pipeline and `res.json` cost about as much CPU as
 * verifying and storing the event; everything else (the admin API, /health,
 * the console, the documentation) goes on to Nest as before.
 *
 * The answers are the controller's (intake.controller.ts, which stays for the
 * documentation and for the spellings Express also routes there, such as
 * `/webhooks/`) and the error filter's (http/error.filter.ts): the same
 * status, JSON body, Content-Type, Retry-After on a storage refusal, and
 * `Connection: close` on a 413, which comes before a body known to be too large
 * is read. Only Express's ETag is left out: a SHA-1 of every answer, 1.5 % of
 * intake's instructions, for a header no sender of a webhook reads (an ETag
 * serves a cache or a conditional request, and a POST is answered afresh
 * each time). The steps are the controller's: ready (503 before reading), body
 * within WEBHOOK_MAX_BYTES, signature, envelope, group commit.
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { Logger } from '@nestjs/common';
import { DomainError, errorBody, StorageUnavailableError } from '../errors.js';
import { readBody } from '../http/body.js';
import type { IntakeService } from './intake.service.js';
import { countUnreadConnections } from './unread-connections.js';

const logger = new Logger('http');

/** The requests this route takes; any other spelling of the path is left to Express, which routes it to the controller. */
export function isWebhookPost(req: IncomingMessage): boolean {
  if (req.method !== 'POST') return false;
  const url = req.url ?? '';
  return url === '/webhooks' || url.startsWith('/webhooks?');
}

/** Puts the webhook route in front of whatever already answers the server's requests (Nest's Express app). */
export function serveWebhooksFirst(server: Server, intake: IntakeService, maxBytes: number): void {
  const others = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  countUnreadConnections(server);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (isWebhookPost(req)) void receiveWebhook(intake, maxBytes, req, res);
    else for (const listener of others) listener.call(server, req, res);
  });
}

async function receiveWebhook(intake: IntakeService, maxBytes: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    intake.assertReady();
    const rawBody = await readBody(req, maxBytes);
    const { id, status } = await intake.receiveWebhook(rawBody, req.headers['x-service-signature'] as string | undefined);
    // `{ id, status }` as JSON.stringify writes it: only the id needs escaping (0.25 µs against the object's 0.61).
    answerText(res, status === 'duplicate' ? 200 : 202, `{"id":${JSON.stringify(id)},"status":"${status}"}`);
  } catch (error) {
    answerError(res, error);
  }
}

/** As the error filter answers: a domain error with its status and code, anything else 500 and logged. */
function answerError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) return;
  if (!(error instanceof DomainError)) {
    logger.error(`unexpected error: ${(error as Error)?.message ?? String(error)}`, (error as Error)?.stack);
    answer(res, 500, errorBody('internal_error', 'the engine failed to handle this request; see its log'));
    return;
  }
  if (error.code === 'payload_too_large') res.setHeader('Connection', 'close');
  if (error.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(error.retryAfterSeconds));
  if (error instanceof StorageUnavailableError) error.refused();
  answer(res, error.status, errorBody(error.code, error.message, error.details));
}

/**
 * As Express's `res.status(status).json(body)`, its ETag aside: headers set before (`Connection`, `Retry-After`) are
 * kept, the answer's own given to `writeHead` as one list (node:http checks and stores each `setHeader` apart).
 */
function answer(res: ServerResponse, status: number, body: unknown): void {
  answerText(res, status, JSON.stringify(body));
}

function answerText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, ['Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(text))]);
  res.end(text);
}
