/**
 * The OpenAPI side of the console (openapi.ts holds the rest): its sign-in
 * routes, the live event feed, the event list's filters, and the answers of
 * the admin reads the console added (overview, rule problems, event context).
 */
import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiCookieAuth, ApiOperation, ApiQuery, ApiResponse, ApiSecurity } from '@nestjs/swagger';

type Schema = Record<string, unknown>;
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const obj = (properties: Record<string, Schema>, extra: Schema = {}): Schema => ({ type: 'object', properties, ...extra });
const str = (description?: string): Schema => ({ type: 'string', ...(description ? { description } : {}) });
const int = (description?: string): Schema => ({ type: 'integer', ...(description ? { description } : {}) });
const nullable = (schema: Schema): Schema => ({ ...schema, nullable: true });
const list = (items: Schema): Schema => ({ type: 'array', items });
const counts: Schema = { type: 'object', additionalProperties: { type: 'integer' } };
const errorResponse = (status: number, description: string) => ApiResponse({ status, description, schema: ref('Error') });

/** The session cookie: accepted by every admin route alongside the Bearer token. */
export const CONSOLE_COOKIE = 'engine_console';

const chainLink = obj({ event_id: str(), type: str(), status: str(), action_run: str(), action_type: str(), rule: str(), at: str() });

export const CONSOLE_SCHEMAS: Record<string, Schema> = {
  ConsoleSession: obj({ signed_in: { type: 'boolean' }, expires_at: str('when the session ends unless signed out earlier') }, { required: ['signed_in', 'expires_at'] }),
  Overview: obj({
    now: str(),
    dry_run: { type: 'boolean' },
    rules: obj({ loaded: int(), enabled: int(), file_problems: int() }),
    queues: obj({ events: int('events not evaluated yet'), actions: int('action runs not ended') }),
    rate_budget: obj({
      limit_per_minute: int(),
      remaining_in_window: int('calls this process may still make in the current 60-second window'),
      last_ratelimit_remaining: nullable(int('the last X-RateLimit-Remaining the service sent')),
      paused_until: nullable(str('calls are held until then (429 or X-RateLimit-Remaining: 0)')),
    }),
    loops_blocked: obj({ last_hour: int(), retained: int(), max_chain_depth: int() }),
    failed_action_runs: int('action runs that failed for good and wait for an operator'),
    events_per_minute: list(obj({ minute: str('YYYY-MM-DDTHH:MM, UTC'), counts })),
    action_runs_per_minute: list(obj({ minute: str(), counts })),
  }),
  RuleProblems: obj({ problems: list(obj({ file: str(), path: str(), message: str() }, { required: ['file', 'path', 'message'] })) }),
  AttemptRecord: obj({
    started_at: str(),
    duration_ms: int('including any wait for the rate budget'),
    outcome: { type: 'string', enum: ['ok', 'http', 'network', 'timeout'] },
    status: nullable(int()),
    error: nullable(obj({ code: str(), message: str() })),
    retry_after: nullable(str()),
  }),
  EventContext: obj({
    id: str(),
    self_caused: { type: 'boolean' },
    depth: int(),
    max_chain_depth: int(),
    dry_run: { type: 'boolean' },
    caused_by: nullable({ ...chainLink, description: 'the engine action whose change this event reports' }),
    caused: list({ ...chainLink, description: 'an event this event\'s actions caused' }),
    waiting: list(obj({ kind: { type: 'string', enum: ['evaluating', 'postponed', 'behind_event', 'behind_action_runs', 'causal_barrier', 'queued'] } }, { additionalProperties: true })),
    throttled: list(obj({ execution: str(), rule: str(), key: nullable(str()), limit: nullable(int()), window_seconds: nullable(int()) })),
    attempts: { type: 'object', additionalProperties: nullable(list(ref('AttemptRecord'))), description: 'by action run id; null: this process has no record of its attempts' },
  }),
};

/** Filters of the event list and of the live feed. */
export function EventFilterQueries() {
  const filters: Array<[string, string]> = [
    ['type', 'event type, e.g. task.completed'],
    ['status', 'received, processed, ignored, failed or loop_blocked'],
    ['resource', 'the resource the event is about: kind:id (task:tsk_1), or an id of any kind'],
    ['rule', 'a rule id: the events it was evaluated for'],
    ['since', 'received at or after (ISO-8601)'],
    ['until', 'received at or before (ISO-8601)'],
  ];
  return applyDecorators(
    ...filters.map(([name, description]) => ApiQuery({ name, required: false, schema: { type: 'string' }, description })),
    errorResponse(400, 'a bad filter'),
  );
}

/** A server-sent events route of the admin API. */
export function EventStream(summary: string) {
  return applyDecorators(
    ApiBearerAuth(),
    ApiCookieAuth(CONSOLE_COOKIE),
    ApiOperation({ summary }),
    ApiResponse({
      status: 200,
      description: '`ready`, then `event` messages (data: an EventSummary, id: its place in the order received), `ping` now and then',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    }),
    errorResponse(401, 'missing or wrong admin token'),
  );
}

const SESSION_ROUTES = {
  'sign-in': () => [
    ApiOperation({ summary: 'Sign in to the console with the admin token (in the body, never in the URL): sets an HttpOnly, SameSite=Strict session cookie' }),
    ApiBody({ schema: obj({ token: str('ADMIN_TOKEN') }, { required: ['token'] }) }),
    ApiResponse({ status: 200, description: 'signed in; Set-Cookie carries the session', schema: ref('ConsoleSession') }),
    errorResponse(400, 'not a JSON body'),
    errorResponse(401, 'not the admin token'),
    errorResponse(413, 'body larger than WEBHOOK_MAX_BYTES (payload_too_large)'),
  ],
  status: () => [
    ApiOperation({ summary: 'Whether the session cookie names a live console session' }),
    ApiSecurity(CONSOLE_COOKIE),
    ApiResponse({ status: 200, description: 'signed in', schema: ref('ConsoleSession') }),
    errorResponse(401, 'not signed in'),
  ],
  'sign-out': () => [ApiOperation({ summary: 'Sign out: the session is forgotten and its cookie cleared' }), ApiResponse({ status: 204, description: 'signed out' })],
};

export function ConsoleSessionRoute(kind: keyof typeof SESSION_ROUTES) {
  return applyDecorators(...SESSION_ROUTES[kind]());
}
