/**
 * The in-memory flow engine the benchmark measures the engine against, beside
 * the reference server: Node-RED's runtime (`@node-red/runtime` and its core
 * nodes, embedded as the `node-red` package embeds them, without the editor)
 * running one flow that does what the benchmark's rule does (bench-engine.ts
 * BENCH_RULE), the way a Node-RED user would draw it:
 *
 *   http in (POST /webhooks, body not parsed)
 *     → function "verify the webhook": the signature (HMAC-SHA256 of the body's bytes, as
 *       the engine checks it), the JSON; 401 or 400, else 202 at once
 *         → http response
 *     → switch: `type` is task.created → switch: the title starts with "Bench"
 *     → function: the service's request (POST /v1/tasks, the Bearer key, an
 *       Idempotency-Key, the follow-up's project and title)
 *     → http request (kept-alive connections, the node's "persist" option)
 *
 * Nothing is stored: the answer 202 goes out before anything is done, and what
 * the flow has not yet sent is lost if the process stops. That is what the
 * engine is measured against here (a durable engine can be faster than an
 * in-memory one). No retries, no ordering, no explanations.
 *
 * Environment (set by bench-engine.ts flowEnv): PORT, HOST, WEBHOOK_SECRET,
 * SERVICE_API_URL, SERVICE_API_KEY. GET /health answers 200 once the flow has
 * answered a webhook (an unsigned one, refused); a flow that does not start ends
 * the process.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { dirname, join } from 'node:path';
import runtime from '@node-red/runtime';
import redUtil from '@node-red/util';
import { verifySignature } from '../src/intake/signature.js';

const env = process.env;
const SECRET = env.WEBHOOK_SECRET ?? '';
/** The service's API as the engine's SERVICE_API_URL names it (…/v1), as reference-server.ts reads it. */
const TASKS_URL = `${(env.SERVICE_API_URL ?? 'http://127.0.0.1:4010/v1').replace(/\/$/, '')}/tasks`;
const API_KEY = env.SERVICE_API_KEY ?? '';

/** The function nodes' code (Node-RED runs each in a sandbox of its own; `global.get` reads functionGlobalContext). */
const VERIFY = `
const check = global.get('verify');
const given = String(msg.req.headers['x-service-signature'] || '');
if (!check(msg.payload, given)) { msg.statusCode = 401; msg.payload = { error: { code: 'invalid_signature' } }; return [msg, null]; }
let event;
try { event = JSON.parse(msg.payload.toString('utf8')); } catch (error) { event = undefined; }
if (!event || typeof event.id !== 'string' || typeof event.type !== 'string') {
  msg.statusCode = 400; msg.payload = { error: { code: 'invalid_event' } }; return [msg, null];
}
msg.statusCode = 202;
msg.payload = { id: event.id, status: 'accepted' };
return [msg, { payload: event }];`;

const REQUEST = `
const event = msg.payload;
msg.method = 'POST';
msg.url = global.get('tasksUrl');
msg.headers = { authorization: 'Bearer ' + global.get('apiKey'), 'content-type': 'application/json', 'idempotency-key': 'flow-' + event.id };
msg.payload = JSON.stringify({ project_id: event.data.task.project_id, title: 'Follow-up ' + event.id });
return msg;`;

/** The flow, as Node-RED's editor would export it. */
const FLOW = [
  { id: 'f0', type: 'tab', label: 'Webhooks' },
  { id: 'f1', z: 'f0', type: 'http in', url: '/webhooks', method: 'post', skipBodyParsing: true, wires: [['f2']] },
  { id: 'f2', z: 'f0', type: 'function', name: 'verify the webhook', func: VERIFY, outputs: 2, wires: [['f3'], ['f4']] },
  { id: 'f3', z: 'f0', type: 'http response', wires: [] },
  {
    id: 'f4', z: 'f0', type: 'switch', name: 'a task created', property: 'payload.type', propertyType: 'msg',
    rules: [{ t: 'eq', v: 'task.created', vt: 'str' }], checkall: 'true', outputs: 1, wires: [['f5']],
  },
  {
    id: 'f5', z: 'f0', type: 'switch', name: 'titled Bench…', property: 'payload.data.task.title', propertyType: 'msg',
    rules: [{ t: 'regex', v: '^Bench', case: false }], checkall: 'true', outputs: 1, wires: [['f6']],
  },
  { id: 'f6', z: 'f0', type: 'function', name: 'the follow-up task', func: REQUEST, outputs: 1, wires: [['f7']] },
  { id: 'f7', z: 'f0', type: 'http request', method: 'use', ret: 'txt', paytoqs: 'ignore', url: '', persist: true, wires: [[]] },
];

/** The signature checked by the engine's own function (`sha256=<hex>` of the body's bytes, the engine's default scheme). */
function signatureOk(body: Buffer, header: string): boolean {
  return SECRET !== '' && verifySignature(body, header, { scheme: 'hmac-sha256', secrets: [SECRET], toleranceSeconds: 0, now: new Date() }).ok;
}

/** Node-RED's settings: the flow file in `userDir`, no editor, no admin API, nothing installed, errors logged. */
function settingsFor(userDir: string) {
  return {
    userDir,
    flowFile: 'flows.json',
    coreNodesDir: dirname(createRequire(import.meta.url).resolve('@node-red/nodes')),
    httpNodeRoot: '/',
    httpAdminRoot: false,
    credentialSecret: false,
    logging: { console: { level: 'error', metrics: false, audit: false } },
    externalModules: { autoInstall: false, palette: { allowInstall: false }, modules: { allowInstall: false } },
    functionGlobalContext: { verify: signatureOk, tasksUrl: TASKS_URL, apiKey: API_KEY },
  };
}

/**
 * The flows start after `start` resolves, and one that fails is only logged: waits until the flow answers a webhook
 * (an unsigned one: 401), and ends the process if it does not within 30 s.
 */
async function untilTheFlowAnswers(host: string, port: number): Promise<void> {
  const unsigned = () => fetch(`http://${host}:${port}/webhooks`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(5_000) })
    .then((answer) => `status ${answer.status}`, (error: Error) => error.message);
  let last = '';
  for (const giveUp = Date.now() + 30_000; (last = await unsigned()) !== 'status 401' && Date.now() < giveUp;) await delay(100);
  if (last === 'status 401') return;
  process.stderr.write(`the flow does not answer webhooks (${last})\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  const userDir = mkdtempSync(join(tmpdir(), 'bench-flow-'));
  writeFileSync(join(userDir, 'flows.json'), JSON.stringify(FLOW));
  const settings = settingsFor(userDir);
  let running = false;
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(running ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: running ? 'ok' : 'starting' }));
      return;
    }
    runtime.httpNode(req, res);
  });
  redUtil.init(settings);
  runtime.init(settings, server);
  await runtime.start();
  const host = env.HOST ?? '127.0.0.1';
  await new Promise<void>((listening) => server.listen(Number(env.PORT ?? 0), host, listening));
  await untilTheFlowAnswers(host, (server.address() as AddressInfo).port);
  running = true;
  process.once('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    void runtime.stop().finally(() => {
      rmSync(userDir, { recursive: true, force: true });
      process.exit(0);
    });
  });
}

await main();
