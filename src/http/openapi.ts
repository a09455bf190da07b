/**
 * The OpenAPI document (`/docs`, `/docs-json`). Bodies are read raw (webhooks
 * must be verified on their bytes) rather than through DTO classes, so every
 * body and answer is described here, once, as a schema, and the routes name them.
 */
import { applyDecorators, type INestApplication } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCookieAuth,
  ApiOperation,
  ApiQuery,
  ApiResponse,
  DocumentBuilder,
  SwaggerModule,
  type OpenAPIObject,
} from '@nestjs/swagger';
import { ENGINE_VERSION } from '../version.js';
import { CONSOLE_COOKIE, CONSOLE_SCHEMAS } from './openapi-console.js';

type Schema = Record<string, unknown>;
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const obj = (properties: Record<string, Schema>, extra: Schema = {}): Schema => ({ type: 'object', properties, ...extra });
const str = (description?: string): Schema => ({ type: 'string', ...(description ? { description } : {}) });
const nullable = (schema: Schema): Schema => ({ ...schema, nullable: true });
const anything: Schema = { description: 'any JSON value' };

export const SCHEMAS: Record<string, Schema> = {
  Error: obj(
    {
      error: obj(
        {
          code: str('machine-readable code, e.g. invalid_signature, validation_failed'),
          message: str('what went wrong, for a person'),
          details: { type: 'array', items: ref('Problem') },
        },
        { required: ['code', 'message'] },
      ),
    },
    { required: ['error'] },
  ),
  Problem: obj({ path: str('JSON path or field, e.g. $.actions[0].type'), message: str() }, { required: ['path', 'message'] }),
  Event: obj(
    { id: str(), type: str('e.g. task.completed'), created_at: str(), data: { type: 'object', additionalProperties: true } },
    { required: ['type'], additionalProperties: true, description: 'the service\'s event envelope' },
  ),
  Accepted: obj({ id: str('the event id'), status: { type: 'string', enum: ['accepted', 'duplicate'] } }, { required: ['id', 'status'] }),
  Replayed: obj({ id: str(), status: str(), replay_of: str() }),
  Rule: {
    type: 'object',
    additionalProperties: true,
    description: 'a rule as in a rule file; the full JSON Schema is rules/rule.schema.json',
    required: ['id', 'actions'],
  },
  RuleSummary: obj({
    id: str(),
    name: nullable(str()),
    source: { type: 'string', enum: ['file', 'api'] },
    path: str('the rule file, relative to RULES_DIR (file rules)'),
    enabled: { type: 'boolean' },
    priority: { type: 'integer' },
    triggers: { type: 'array', items: str() },
    version: str('hash of the rule definition'),
    counts: obj({ matched: { type: 'integer' }, succeeded: { type: 'integer' }, failed: { type: 'integer' } }),
    last_matched_at: nullable(str()),
  }),
  RuleDetail: { allOf: [ref('RuleSummary'), obj({ definition: ref('Rule'), file_problems: { type: 'array', items: ref('Problem') } })] },
  Validation: obj({ valid: { type: 'boolean' }, errors: { type: 'array', items: ref('Problem') } }),
  Condition: obj({
    fact: str(),
    path: str(),
    params: { type: 'object', additionalProperties: true },
    operator: str(),
    value: anything,
    factValue: anything,
    result: { type: 'boolean' },
    group: str('where the condition sits, e.g. all[1].any[0]'),
    skipped: { type: 'boolean' },
    error: str(),
  }),
  Request: obj({ method: str(), path: str('relative to the service\'s /v1'), query: { type: 'object' }, body: anything }),
  TestResult: obj({
    rule: str(),
    version: str(),
    enabled: { type: 'boolean' },
    listens: { type: 'boolean' },
    matched: { type: 'boolean' },
    conditions: { type: 'array', items: ref('Condition') },
    error: str(),
    actions: {
      type: 'array',
      items: obj({
        id: str(),
        type: str(),
        request: ref('Request'),
        error: obj({ code: str(), message: str() }),
        delay: obj({ duration: str('as rendered, e.g. PT72H'), ms: { type: 'integer' } }),
        check: obj({ passed: { type: 'boolean' }, conditions: { type: 'array', items: ref('Condition') }, error: str() }),
        items: { type: 'array', description: 'a forEach action: one rendered request (or error) per item', items: obj({ index: { type: 'integer' }, request: ref('Request'), error: obj({ code: str(), message: str() }) }) },
      }),
    },
  }),
  BacktestReport: obj({
    events: { type: 'array', items: { type: 'object', additionalProperties: true } },
    summary: { type: 'object', additionalProperties: true },
    notes: { type: 'array', items: str() },
  }),
  ReloadReport: obj({
    loaded: { type: 'array', items: str() },
    changed: { type: 'array', items: str() },
    removed: { type: 'array', items: str() },
    unchanged: { type: 'array', items: str() },
    kept: { type: 'array', items: str(), description: 'rules whose file is invalid now; their last good version runs' },
    rejected: { type: 'array', items: obj({ file: str(), path: str(), message: str() }) },
  }),
  EventSummary: obj({
    id: str(),
    type: str(),
    status: { type: 'string', enum: ['received', 'processed', 'ignored', 'failed', 'loop_blocked'] },
    source: { type: 'string', enum: ['webhook', 'admin', 'schedule', 'replay'] },
    resource: nullable(str()),
    depth: { type: 'integer' },
    attempts: { type: 'integer' },
    received_at: str(),
    processed_at: nullable(str()),
    replay_of: nullable(str()),
    error: nullable(str()),
  }),
  EventDetail: {
    allOf: [
      ref('EventSummary'),
      obj({
        payload: anything,
        rules: { type: 'array', items: { type: 'object', additionalProperties: true }, description: 'every rule that listened, its outcome and each condition' },
        executions: { type: 'array', items: ref('Execution') },
        cancelled: {
          type: 'array',
          items: obj({ execution: str(), rule: str() }),
          description: 'the waiting executions this event cancelled (options.cancelOn)',
        },
        waiting: {
          type: 'array',
          items: { type: 'object', additionalProperties: true },
          description: 'while the event is `received`, why it waits: evaluating, postponed, behind an event or action runs on its resource, or the causal barrier (the creating runs in flight in its scope, and why)',
        },
      }),
    ],
  },
  Execution: obj({
    id: str(),
    event_id: str(),
    rule: str(),
    rule_version: str(),
    status: { type: 'string', enum: ['running', 'waiting', 'succeeded', 'failed', 'stopped', 'cancelled', 'debounced', 'throttled', 'skipped'] },
    error: nullable(str()),
    conditions: { type: 'array', items: ref('Condition') },
    created_at: str(),
    finished_at: nullable(str()),
    resume_at: nullable(str('while waiting: when its delay ends')),
    cancelled_by: nullable(str('cancelled: the id of the event that cancelled it, or `admin`')),
    debounce_key: nullable(str('the rendered options.debounce.key')),
    debounced_into: nullable(str('debounced: the execution that ran instead')),
    actions: { type: 'array', items: ref('ActionRun') },
  }),
  ActionRun: obj({
    id: str('also the Idempotency-Key of every attempt'),
    execution_id: str(),
    rule: str(),
    position: { type: 'integer' },
    action_id: nullable(str()),
    type: str(),
    status: { type: 'string', enum: ['pending', 'running', 'succeeded', 'retrying', 'failed', 'skipped', 'cancelled'] },
    attempts: { type: 'integer' },
    next_attempt_at: nullable(str()),
    request: { description: 'the request as rendered (method, path, body); for a delay `{resume_at}`; null until rendered' },
    item_index: nullable({ type: 'integer', description: 'one item of a forEach action: its index' }),
    item: { description: 'one item of a forEach action: the item' },
    response_status: nullable({ type: 'integer' }),
    response: anything,
    error: nullable(obj({ code: str(), message: str() })),
    created_at: str(),
    updated_at: str(),
  }),
  Replica: obj(
    {
      id: str('the replica\'s lease owner id (a UUID, new at each start)'),
      self: { type: 'boolean', description: 'the replica that answered' },
      status: { type: 'string', enum: ['alive', 'dead', 'stopped'], description: 'dead: its heartbeat stopped and its work was taken over; stopped: it stopped gracefully' },
      host: str(),
      pid: { type: 'integer' },
      version: str(),
      started_at: str(),
      heartbeat_at: str('its last heartbeat (REPLICA_HEARTBEAT_MS apart)'),
      stopped_at: nullable(str()),
      dead_at: nullable(str()),
      work_in_hand: obj({ events: { type: 'integer', description: 'waiting events it holds a lease on' }, action_runs: { type: 'integer', description: 'unfinished action runs it holds a lease on' } }),
      events_done: { type: 'integer', description: 'events it evaluated, as of its last heartbeat' },
      action_runs_done: { type: 'integer', description: 'action runs it brought to an end, as of its last heartbeat' },
    },
    { required: ['id', 'self', 'status', 'host', 'pid', 'version', 'started_at', 'heartbeat_at', 'work_in_hand', 'events_done', 'action_runs_done'] },
  ),
  ReplicaList: obj({ replicas: { type: 'array', items: ref('Replica') } }, { required: ['replicas'] }),
};

const errorResponse = (status: number, description: string) => ApiResponse({ status, description, schema: ref('Error') });

/** A success answer: a schema's name in `components/schemas`, a schema, or none (e.g. 204). */
export function SuccessResponse(status: number, description: string, answer?: string | Schema) {
  const schema = typeof answer === 'string' ? ref(answer) : answer;
  return ApiResponse({ status, description, ...(schema ? { schema } : {}) });
}

/**
 * An admin route: bearer token (or the console's session cookie), 401, and the
 * answer it gives (another success answer: add a SuccessResponse).
 */
export function AdminRoute(summary: string, status: number, answer?: string | Schema, ...errors: Array<[number, string]>) {
  return applyDecorators(
    ApiBearerAuth(),
    ApiCookieAuth(CONSOLE_COOKIE),
    ApiOperation({ summary }),
    SuccessResponse(status, 'success', answer),
    errorResponse(401, 'missing or wrong admin token'),
    ...errors.map(([code, description]) => errorResponse(code, description)),
  );
}

export const Paged = (item: string) => obj({ items: { type: 'array', items: ref(item) }, next_cursor: nullable(str()) });

export function ListQueries(...filters: Array<[string, string]>) {
  return applyDecorators(
    ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 50 } }),
    ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: 'next_cursor of the previous page' }),
    ...filters.map(([name, description]) => ApiQuery({ name, required: false, schema: { type: 'string' }, description })),
    errorResponse(400, 'a bad filter, limit or cursor'),
  );
}

/**
 * A route that reads a JSON body. Every such body is read with the
 * WEBHOOK_MAX_BYTES limit (readBody), so the route can also answer 413.
 */
export const JsonBody = (schema: string | Schema, description?: string) =>
  applyDecorators(
    ApiBody({ schema: typeof schema === 'string' ? ref(schema) : schema, description }),
    errorResponse(413, 'body larger than WEBHOOK_MAX_BYTES (payload_too_large)'),
  );

/** A route that writes to the database: while the database refuses writes it answers 503 with Retry-After. */
export const StorageWrite = () => errorResponse(503, 'the database refuses writes (storage_unavailable); nothing was stored; Retry-After says when to try again');

export { errorResponse };

export function buildOpenApi(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Automation engine')
    .setDescription('Webhook intake and the admin API of the automation engine. Errors always have the shape {"error":{"code","message","details?"}}.')
    .setVersion(ENGINE_VERSION)
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' })
    .addCookieAuth(CONSOLE_COOKIE, { type: 'apiKey', in: 'cookie', name: CONSOLE_COOKIE, description: 'a console session (POST /console/session); writes also need the header X-Engine-Console: 1' }, CONSOLE_COOKIE)
    .build();
  const document = SwaggerModule.createDocument(app, config);
  document.components = { ...document.components, schemas: { ...(document.components?.schemas ?? {}), ...(SCHEMAS as Record<string, object>), ...(CONSOLE_SCHEMAS as Record<string, object>) } };
  return document;
}

export function setupOpenApi(app: INestApplication): void {
  SwaggerModule.setup('docs', app, () => buildOpenApi(app), { jsonDocumentUrl: 'docs-json' });
}
