/**
 * `/_sim/*`: the simulator's own control surface for tests and demos. Outside
 * /v1 on purpose: no key, no rate limit, no faults, and not in the request log,
 * so looking at the simulator never changes what it reports.
 */
import { isObject } from '../json.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SimulatorCore } from './simulator.core.js';
import { parseFaultSettings } from './simulator.faults.js';
import {
  SimError, answerFromError, errorAnswer, parseJsonBody, readBody, send, type Answer,
} from './simulator.http.js';

const ok = (body: unknown, status = 200): Answer => ({ status, body });

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const parsed = parseJsonBody(await readBody(req));
  if (!parsed.ok) throw new SimError(400, 'invalid_json', `body is not valid JSON: ${parsed.message}`);
  if (parsed.value === undefined) return {};
  if (!isObject(parsed.value)) throw new SimError(400, 'validation_failed', 'body must be a JSON object');
  return parsed.value;
}

function faultsView(core: SimulatorCore): Answer {
  return ok({ ...core.faults, rateLimitPerMinute: core.limiter.limit });
}

/** `?method=POST&path_prefix=/v1/tasks` narrow the request log. */
function requestsView(core: SimulatorCore, query: URLSearchParams): Answer {
  const method = query.get('method')?.toUpperCase();
  const prefix = query.get('path_prefix');
  const data = core.requests.filter(
    (r) => (method === undefined || r.method === method) && (prefix === null || r.path.startsWith(prefix)),
  );
  return ok({ data });
}

async function emitFromBody(core: SimulatorCore, req: IncomingMessage): Promise<Answer> {
  const body = await jsonBody(req);
  if (typeof body.type !== 'string' || body.type === '') {
    throw new SimError(400, 'validation_failed', 'type is required and must be a non-empty string');
  }
  if (body.data !== undefined && !isObject(body.data)) {
    throw new SimError(400, 'validation_failed', 'data must be a JSON object');
  }
  return ok(core.emit(body.type, (body.data as Record<string, unknown> | undefined) ?? {}), 202);
}

async function route(core: SimulatorCore, req: IncomingMessage, url: URL): Promise<Answer> {
  const path = url.pathname.replace(/\/+$/, '');
  switch (`${req.method} ${path}`) {
    case 'GET /_sim/health':
      return ok({ status: 'ok' });
    case 'GET /_sim/requests':
      return requestsView(core, url.searchParams);
    case 'GET /_sim/webhooks':
      return ok({ data: core.sender.log });
    case 'GET /_sim/state':
      return ok({
        ...core.state.snapshot(),
        effects_by_idempotency_key: Object.fromEntries(core.idempotency.effects),
      });
    case 'GET /_sim/faults':
      return faultsView(core);
    case 'POST /_sim/faults':
      core.setFaults(parseFaultSettings(await jsonBody(req)));
      return faultsView(core);
    case 'POST /_sim/reset':
      core.reset();
      return ok({ status: 'reset' });
    case 'POST /_sim/emit':
      return emitFromBody(core, req);
    default:
      req.resume();
      return errorAnswer(404, 'not_found', `no control route ${req.method} ${url.pathname}`);
  }
}

export async function handleControl(core: SimulatorCore, req: IncomingMessage, res: ServerResponse, url: URL) {
  const answer = await route(core, req, url).catch(answerFromError);
  send(res, answer);
}
