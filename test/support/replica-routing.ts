/**
 * The network around a set of engine replicas in the end-to-end suites, as a
 * deployment has it: a load balancer in front of their webhooks (the service
 * sends each webhook to one live replica, round robin, and tries the next when
 * one does not answer), and, between each replica and the service, a pass-
 * through proxy that notes what that replica sent and when, so a test can tell
 * which replica holds a request.
 */
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<Listening> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

interface Forwarded {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Sends one request on to `target` (an origin); rejects when it gets no answer. */
function forward(agent: Agent, target: string, req: IncomingMessage, body: Buffer): Promise<Forwarded> {
  const { hostname, port } = new URL(target);
  return new Promise((resolve, reject) => {
    const upstream = request({ host: hostname, port, agent, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      readBody(answer).then((b) => resolve({ status: answer.statusCode ?? 502, headers: answer.headers, body: b }), reject);
    });
    upstream.on('error', reject);
    upstream.end(body);
  });
}

function answer(res: ServerResponse, forwarded: Forwarded): void {
  res.writeHead(forwarded.status, forwarded.headers);
  res.end(forwarded.body);
}

function badGateway(res: ServerResponse, message: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(502, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ error: { code: 'bad_gateway', message } }));
}

/**
 * Round robin over the replicas `live()` names (origins), in the order given;
 * a replica that gives no answer is skipped for this request. 502 when none
 * answers (the simulator then retries the webhook later, as the service would).
 */
export async function startBalancer(live: () => string[]): Promise<Listening> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  let next = 0;
  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const targets = live();
      for (let tried = 0; tried < targets.length; tried++) {
        const target = targets[next++ % targets.length];
        try {
          return answer(res, await forward(agent, target, req, body));
        } catch {
          // Down or going down: the next replica gets it.
        }
      }
      badGateway(res, `no replica answered (${targets.length} live)`);
    })().catch(() => badGateway(res, 'balancer failure'));
  });
  const listening = await listen(server);
  return { url: listening.url, close: async () => (agent.destroy(), await listening.close()) };
}

/** One request a replica sent to the service, as its proxy saw it. */
export interface SentRequest {
  replica: number;
  /** Epoch ms when it reached the proxy, and when its answer came back (undefined while it waits). */
  at: number;
  answeredAt?: number;
  method: string;
  path: string;
  idempotencyKey?: string;
  status?: number;
}

/** A pass-through proxy to `serviceOrigin` for replica `replica`, noting every request in `log`. */
export async function startRecordingProxy(replica: number, serviceOrigin: string, log: SentRequest[]): Promise<Listening> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server = createServer((req, res) => {
    const key = req.headers['idempotency-key'];
    const entry: SentRequest = {
      replica, at: Date.now(), method: req.method ?? 'GET', path: req.url ?? '/', idempotencyKey: typeof key === 'string' ? key : undefined,
    };
    log.push(entry);
    void (async () => {
      const forwarded = await forward(agent, serviceOrigin, req, await readBody(req));
      entry.answeredAt = Date.now();
      entry.status = forwarded.status;
      answer(res, forwarded);
    })().catch(() => {
      entry.answeredAt = Date.now();
      badGateway(res, 'the service did not answer');
    });
  });
  const listening = await listen(server);
  return { url: listening.url, close: async () => (agent.destroy(), await listening.close()) };
}
