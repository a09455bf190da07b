/**
 * The reference the engine is measured against (`npm run bench` starts it as a
 * child process, like the engine, on the same load and the same fake service):
 * what a team would hand-roll for one automation, with no framework.
 *
 * What it does, per webhook (`POST /webhooks`):
 *   - reads the raw body (at most 1 MiB) and checks `X-Service-Signature:
 *     sha256=<hex>`, the HMAC-SHA256 of the raw body with WEBHOOK_SECRET
 *     (timing-safe compare), as the engine's default scheme does: 401 if wrong;
 *   - parses the JSON and requires a string `id` and `type`: 400 if not;
 *   - joins the batch of webhooks that arrived together (flushed on the next
 *     setImmediate, at most 500 per statement) and stores it with one
 *     `INSERT … ON CONFLICT (event_id) DO NOTHING RETURNING` in one transaction on
 *     a connection with `synchronous = FULL` (WAL), i.e. synced to disk;
 *   - only then answers 202 (200 for an id it had already stored);
 *   - for each new event that the hard-coded condition accepts (`task.created`
 *     whose title starts with "Bench", the benchmark rule's condition), inserts
 *     an action-run row (`running`, with the request) in one transaction per
 *     batch, on a second connection with `synchronous = NORMAL` (the engine's
 *     setting for its own bookkeeping), sends `POST <SERVICE_API_URL>/tasks`
 *     `{ project_id, title: "Follow-up <event id>" }` with Bearer SERVICE_API_KEY
 *     and an Idempotency-Key over a keep-alive agent (at most 128 sockets), and
 *     on the answer updates the row (`succeeded`/`failed`, status code, body);
 *     the answers that arrive together are written in one transaction.
 *
 * What it does not do, so read its figures as a floor for the cost of
 * durability, not as an engine with fewer features: no rules (one condition
 * and one action, compiled into the code: no rule files, no matching, no
 * templates, no explanations or execution records), no retries, no rate
 * budget, no timeouts beyond Node's defaults, no loop protection, no
 * per-resource ordering or causal barrier, no lease or claim (actions start
 * from memory right after the commit: a crash loses the actions not yet sent,
 * and nothing is re-done on restart), no status kept on the event row, one
 * index on `events` (the unique event id) where the engine keeps several, no
 * admin API, metrics or logs, no graceful drain beyond closing the listener.
 *
 * Configuration (environment): PORT, HOST (default 127.0.0.1), DATABASE_FILE,
 * WEBHOOK_SECRET, SERVICE_API_URL (…/v1), SERVICE_API_KEY. `GET /health`
 * answers 200 once it listens.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';

interface Statement {
  run(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
interface Connection {
  pragma(sql: string): unknown;
  exec(sql: string): void;
  prepare(sql: string): Statement;
  transaction<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T;
  close(): void;
}
const SqliteDatabase = createRequire(import.meta.url)('better-sqlite3') as new (file: string) => Connection;

interface Pending {
  id: string;
  event: { id: string; type: string; data?: { task?: { project_id?: unknown; title?: unknown } } };
  payload: string;
  res: ServerResponse;
}

const env = process.env;
const SECRET = env.WEBHOOK_SECRET ?? '';
const SERVICE = new URL(`${(env.SERVICE_API_URL ?? 'http://127.0.0.1:4010/v1').replace(/\/$/, '')}/tasks`);
const AUTHORIZATION = `Bearer ${env.SERVICE_API_KEY ?? ''}`;
const MAX_BODY = 1_048_576;
const MAX_BATCH = 500;
const SCHEMA = `
  CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL,
    payload TEXT NOT NULL, received_at TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS action_runs (id INTEGER PRIMARY KEY, event_seq INTEGER NOT NULL, status TEXT NOT NULL,
    request TEXT NOT NULL, response_status INTEGER, response TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);`;

function open(file: string, synchronous: 'FULL' | 'NORMAL'): Connection {
  const db = new SqliteDatabase(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma('busy_timeout = 5000');
  return db;
}

const eventsDb = open(env.DATABASE_FILE ?? 'reference.sqlite', 'FULL');
eventsDb.exec(SCHEMA);
const runsDb = open(env.DATABASE_FILE ?? 'reference.sqlite', 'NORMAL');
const insertRun = runsDb.prepare(`INSERT INTO action_runs (event_seq, status, request, created_at, updated_at) VALUES (?, 'running', ?, ?, ?) RETURNING id`);
const finishRun = runsDb.prepare('UPDATE action_runs SET status = ?, response_status = ?, response = ?, updated_at = ? WHERE id = ?');
const insertStatements = new Map<number, Statement>();
const upstream = new Agent({ keepAlive: true, maxSockets: 128 });

function insertEvents(size: number): Statement {
  let statement = insertStatements.get(size);
  if (statement === undefined) {
    const rows = Array.from({ length: size }, () => '(?, ?, ?, ?)').join(', ');
    statement = eventsDb.prepare(`INSERT INTO events (event_id, type, payload, received_at) VALUES ${rows} ON CONFLICT (event_id) DO NOTHING RETURNING seq, event_id`);
    insertStatements.set(size, statement);
  }
  return statement;
}

function signatureOk(body: Buffer, header: string | string[] | undefined): boolean {
  const hex = typeof header === 'string' ? header.trim().replace(/^sha256=/, '') : '';
  const given = Buffer.from(hex, 'hex');
  const expected = createHmac('sha256', SECRET).update(body).digest();
  return SECRET !== '' && given.length === expected.length && timingSafeEqual(given, expected);
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

// ---- the answers of the service, written in one transaction per tick ----
let finished: unknown[][] = [];
const writeFinished = runsDb.transaction(() => {
  for (const params of finished) finishRun.run(...params);
});
function recordAnswer(runId: number, status: number, body: string): void {
  if (finished.length === 0) {
    setImmediate(() => {
      writeFinished();
      finished = [];
    });
  }
  finished.push([status >= 200 && status < 300 ? 'succeeded' : 'failed', status, body, new Date().toISOString(), runId]);
}

function send(runId: number, eventId: string, body: string): void {
  const req = request(SERVICE, {
    method: 'POST',
    agent: upstream,
    headers: { authorization: AUTHORIZATION, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'idempotency-key': `reference-${eventId}-0` },
  }, (res) => {
    const chunks: Buffer[] = [];
    res.on('data', (chunk: Buffer) => chunks.push(chunk));
    res.on('end', () => recordAnswer(runId, res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8')));
    res.on('error', (error) => recordAnswer(runId, 0, error.message));
  });
  req.on('error', (error) => recordAnswer(runId, 0, error.message));
  req.end(body);
}

/** The one automation: `task.created` with a title starting "Bench" → one task.create. */
function actionFor(event: Pending['event']): string | undefined {
  const task = event.data?.task;
  if (event.type !== 'task.created' || typeof task?.title !== 'string' || !task.title.startsWith('Bench')) return undefined;
  return JSON.stringify({ project_id: task.project_id, title: `Follow-up ${event.id}` });
}

// ---- the events of one tick, committed together, then acknowledged, then acted on ----
let waiting: Pending[] = [];
const storeBatch = eventsDb.transaction((batch: Pending[], now: string) => {
  const params: unknown[] = [];
  for (const p of batch) params.push(p.id, p.event.type, p.payload, now);
  return insertEvents(batch.length).all(...params) as Array<{ seq: number; event_id: string }>;
});
const startRuns = runsDb.transaction((runs: Array<{ seq: number; body: string }>, now: string) =>
  runs.map((r) => (insertRun.all(r.seq, r.body, now, now)[0] as { id: number }).id));

function flush(): void {
  const now = new Date().toISOString();
  const all = waiting;
  waiting = [];
  for (let i = 0; i < all.length; i += MAX_BATCH) {
    const batch = all.slice(i, i + MAX_BATCH);
    let stored: Map<string, number>;
    try {
      stored = new Map(storeBatch(batch, now).map((row) => [row.event_id, row.seq]));
    } catch (error) {
      for (const p of batch) answer(p.res, 500, { error: { code: 'storage_failed', message: (error as Error).message } });
      continue;
    }
    const runs: Array<{ seq: number; id: string; body: string }> = [];
    for (const p of batch) {
      const seq = stored.get(p.id);
      answer(p.res, seq === undefined ? 200 : 202, { id: p.id, status: seq === undefined ? 'duplicate' : 'accepted' });
      const body = seq === undefined ? undefined : actionFor(p.event);
      if (body !== undefined) runs.push({ seq: seq!, id: p.id, body });
    }
    if (runs.length === 0) continue;
    const ids = startRuns(runs, now);
    runs.forEach((run, k) => send(ids[k], run.id, run.body));
  }
}

function receive(body: Buffer, req: IncomingMessage, res: ServerResponse): void {
  if (!signatureOk(body, req.headers['x-service-signature'])) return answer(res, 401, { error: { code: 'invalid_signature' } });
  let event: Pending['event'];
  const text = body.toString('utf8');
  try {
    event = JSON.parse(text) as Pending['event'];
  } catch {
    return answer(res, 400, { error: { code: 'invalid_json' } });
  }
  if (typeof event?.id !== 'string' || typeof event.type !== 'string') return answer(res, 400, { error: { code: 'invalid_event' } });
  if (waiting.length === 0) setImmediate(flush);
  waiting.push({ id: event.id, event, payload: text, res });
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') return answer(res, 200, { status: 'ok' });
  if (req.method !== 'POST' || req.url !== '/webhooks') {
    req.resume();
    return answer(res, 404, { error: { code: 'not_found' } });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on('end', () => (size > MAX_BODY ? answer(res, 413, { error: { code: 'payload_too_large' } }) : receive(Buffer.concat(chunks), req, res)));
});

server.listen(Number(env.PORT ?? 0), env.HOST ?? '127.0.0.1');
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  upstream.destroy();
  eventsDb.close();
  runsDb.close();
  process.exit(0);
});
