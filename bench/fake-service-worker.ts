/**
 * The lean fake service's server, in a worker thread of the benchmark process
 * (bench-fake-service.ts starts it): an event loop of its own, so answering the
 * actions neither waits behind the load generator nor delays its clock.
 *
 * `POST /v1/tasks` answers 201 with a new task, as the service would (no
 * validation, authentication, rate limit or idempotency store: a lean fake).
 * When the title is `Follow-up <event id>` and the event id is
 * `<prefix><index>` for the run in progress, the arrival time (epoch ms, the
 * same clock as the load generator's) is written at `arrivals[index]` in memory
 * shared with the main thread; a second arrival of the same event counts as a
 * duplicate, and titles of no run in progress as strays. Any other request
 * gets 404 and is counted too.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parentPort } from 'node:worker_threads';

/** Slots of the shared Int32Array of counters. */
export const COUNTER = { arrived: 0, duplicates: 1, strays: 2, other: 3 } as const;

interface Run {
  prefix: string;
  arrivals: Float64Array;
  counters: Int32Array;
}

let run: Run | undefined;
let nextTask = 0;

function record(title: unknown): void {
  if (run === undefined) return;
  const { prefix, arrivals, counters } = run;
  const id = typeof title === 'string' && title.startsWith('Follow-up ') ? title.slice('Follow-up '.length) : '';
  const index = id.startsWith(prefix) ? Number(id.slice(prefix.length)) : NaN;
  if (!Number.isInteger(index) || index < 0 || index >= arrivals.length) {
    Atomics.add(counters, COUNTER.strays, 1);
  } else if (arrivals[index] !== 0) {
    Atomics.add(counters, COUNTER.duplicates, 1);
  } else {
    arrivals[index] = performance.timeOrigin + performance.now();
    Atomics.add(counters, COUNTER.arrived, 1);
  }
}

function createTask(body: string, res: ServerResponse): void {
  let parsed: { project_id?: unknown; title?: unknown } = {};
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    // Answered all the same: the fake checks nothing.
  }
  record(parsed.title);
  const now = new Date().toISOString();
  const text = JSON.stringify({
    id: `tsk_fake_${++nextTask}`, project_id: parsed.project_id ?? null, title: parsed.title ?? null,
    status: 'open', assignee_id: null, created_at: now, updated_at: now,
  });
  res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (req.method === 'POST' && req.url === '/v1/tasks') return createTask(Buffer.concat(chunks).toString('utf8'), res);
    if (run !== undefined) Atomics.add(run.counters, COUNTER.other, 1);
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":{"code":"not_found"}}');
  });
}

if (parentPort !== null) {
  const port = parentPort;
  const server = createServer(handle);
  server.keepAliveTimeout = 30_000;
  port.on('message', (message: { type: 'run'; prefix: string; arrivals: SharedArrayBuffer; counters: SharedArrayBuffer } | { type: 'close' }) => {
    if (message.type === 'close') {
      server.closeAllConnections();
      server.close(() => port.close());
      return;
    }
    run = { prefix: message.prefix, arrivals: new Float64Array(message.arrivals), counters: new Int32Array(message.counters) };
    port.postMessage({ type: 'running' });
  });
  server.listen(0, '127.0.0.1', () => port.postMessage({ type: 'listening', port: (server.address() as { port: number }).port }));
}
