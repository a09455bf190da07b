import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifySignature, type SignatureScheme } from '../intake/signature.js';
import type { CliContext } from './cli-output.js';
import { parseArgs, sendEvent } from './send-event.js';

const SECRET = 'whsec_send_event_spec_0123456789';

/** Odd but valid JSON: tabs, CRLF, trailing spaces, non-ASCII, a key order JSON.stringify would keep but not the spacing. */
const UNUSUAL =
  '{\r\n\t"type" :  "task.completed",\n  "id":"evt_spec_1",   \r\n"data": {"task": {"id": "tsk_2", "title": "Release 1.0 – ünïcode ✓",' +
  ' "project_id":"prj_1"}}  ,"created_at":"2025-06-01T12:00:00Z"}\n\n   ';

interface Received {
  body: Buffer;
  signature: string | undefined;
  contentType: string | undefined;
}

/** A stand-in engine: checks the signature as the engine does and answers like it. */
async function startReceiver(scheme: SignatureScheme, answer?: { status: number; body: string }) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const signature = req.headers['x-service-signature'] as string | undefined;
      received.push({ body, signature, contentType: req.headers['content-type'] });
      const check = verifySignature(body, signature, { scheme, secrets: [SECRET], toleranceSeconds: 300, now: new Date() });
      const reply = answer ?? (check.ok
        ? { status: 202, body: JSON.stringify({ id: 'evt_spec_1', status: 'accepted' }) }
        : { status: 401, body: JSON.stringify({ error: { code: check.code, message: check.reason } }) });
      res.writeHead(reply.status, { 'Content-Type': 'application/json' }).end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
  return { url, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function capture(env: CliContext['env'] = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env, stdout: (l) => out.push(l), stderr: (l) => err.push(l), color: false };
  return { context, out, err, all: () => [...out, ...err].join('\n') };
}

function eventFile(content: string | Buffer, name = 'event.json'): string {
  const path = join(mkdtempSync(join(tmpdir(), 'send-event-')), name);
  writeFileSync(path, content);
  return path;
}

describe(sendEvent.name, () => {
  describe('signing', () => {
    it.each<SignatureScheme>(['hmac-sha256', 'timestamped'])('sends the file byte for byte, signed %s as the engine verifies it', async (scheme) => {
      const receiver = await startReceiver(scheme);
      try {
        const file = eventFile(UNUSUAL);
        const { context, out, err } = capture();
        const code = await sendEvent([file, '--url', receiver.url, '--secret', SECRET, '--scheme', scheme], context);
        expect({ code, err }).toEqual({ code: 0, err: [] });
        expect(receiver.received).toHaveLength(1);
        expect(receiver.received[0].body.equals(readFileSync(file))).toBe(true);
        expect(receiver.received[0].contentType).toBe('application/json');
        expect(out.slice(1)).toEqual(['202 Accepted', '{"id":"evt_spec_1","status":"accepted"}']);
      } finally {
        await receiver.close();
      }
    });

    it('takes the secret and scheme from WEBHOOK_SECRET and WEBHOOK_SIGNATURE_SCHEME, signing with the first of several', async () => {
      const receiver = await startReceiver('timestamped');
      try {
        const env = { WEBHOOK_SECRET: `${SECRET},whsec_next_one_9876543210`, WEBHOOK_SIGNATURE_SCHEME: 'timestamped' };
        const { context } = capture(env);
        expect(await sendEvent([eventFile(UNUSUAL), `--url=${receiver.url}`], context)).toBe(0);
        expect(receiver.received[0].signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      } finally {
        await receiver.close();
      }
    });

    it('never prints the secret', async () => {
      const receiver = await startReceiver('hmac-sha256');
      try {
        const { context, all } = capture({ WEBHOOK_SECRET: SECRET });
        await sendEvent([eventFile(UNUSUAL), '--url', receiver.url], context);
        expect(all()).not.toContain(SECRET);
      } finally {
        await receiver.close();
      }
    });
  });

  describe('exit codes', () => {
    it('exits 1 and prints the answer when the engine refuses the event', async () => {
      const receiver = await startReceiver('hmac-sha256');
      try {
        const { context, out } = capture();
        expect(await sendEvent([eventFile(UNUSUAL), '--url', receiver.url, '--secret', 'another_secret_entirely'], context)).toBe(1);
        expect(out[1]).toBe('401 Unauthorized');
        expect(JSON.parse(out[2])).toEqual({ error: { code: 'invalid_signature', message: 'signature does not match' } });
      } finally {
        await receiver.close();
      }
    });

    it('exits 0 on a 200 duplicate answer', async () => {
      const receiver = await startReceiver('hmac-sha256', { status: 200, body: '{"id":"evt_spec_1","status":"duplicate"}' });
      try {
        const { context, out } = capture();
        expect(await sendEvent([eventFile(UNUSUAL), '--url', receiver.url, '--secret', SECRET], context)).toBe(0);
        expect(out.slice(1)).toEqual(['200 OK', '{"id":"evt_spec_1","status":"duplicate"}']);
      } finally {
        await receiver.close();
      }
    });
  });

  describe('problems on our side exit 2 with a clear message', () => {
    it('refuses to send without a secret', async () => {
      const { context, out, err } = capture({});
      expect(await sendEvent([eventFile(UNUSUAL)], context)).toBe(2);
      expect(out).toEqual([]);
      expect(err).toEqual([
        "send-event: no webhook secret: WEBHOOK_SECRET is not set; pass --secret S or set WEBHOOK_SECRET to the engine's secret",
      ]);
    });

    it('names a missing file', async () => {
      const { context, err } = capture({ WEBHOOK_SECRET: SECRET });
      expect(await sendEvent(['does/not/exist.json'], context)).toBe(2);
      expect(err).toEqual(['send-event: event file not found: does/not/exist.json']);
    });

    it('names a file that is not JSON', async () => {
      const file = eventFile('{"type": "task.completed", oops}');
      const { context, err } = capture({ WEBHOOK_SECRET: SECRET });
      expect(await sendEvent([file], context)).toBe(2);
      expect(err[0]).toMatch(new RegExp(`^send-event: event file is not JSON: ${file}: `));
    });

    it('names the URL when nothing listens there', async () => {
      const receiver = await startReceiver('hmac-sha256');
      await receiver.close();
      const { context, err, all } = capture({ WEBHOOK_SECRET: SECRET });
      expect(await sendEvent([eventFile(UNUSUAL), '--url', receiver.url], context)).toBe(2);
      expect(err).toEqual([expect.stringContaining(`send-event: cannot reach ${receiver.url}: connection refused`)]);
      expect(all()).not.toContain(SECRET);
    });

    it.each([
      [[], /expected one EVENT_FILE, got 0/],
      [['a.json', 'b.json'], /expected one EVENT_FILE, got 2/],
      [['a.json', '--verbose'], /Unknown option '--verbose'/],
      [['a.json', '--scheme', 'md5'], /--scheme must be one of hmac-sha256, timestamped, got "md5"/],
      [['a.json', '--url', 'ftp://x/webhooks'], /--url must be http/],
    ])('rejects the arguments %j', async (args, message) => {
      const { context, err } = capture({ WEBHOOK_SECRET: SECRET });
      expect(await sendEvent(args, context)).toBe(2);
      expect(err[0]).toMatch(message);
      expect(err[1]).toMatch(/^usage: npm run send-event/);
    });
  });
});

describe(parseArgs.name, () => {
  it('defaults to the engine on PORT (3000) and hmac-sha256', () => {
    expect(parseArgs(['e.json'], { WEBHOOK_SECRET: 's1' })).toEqual({
      help: false,
      options: { file: 'e.json', url: 'http://127.0.0.1:3000/webhooks', secret: 's1', scheme: 'hmac-sha256' },
    });
    expect(parseArgs(['e.json'], { WEBHOOK_SECRET: 's1', PORT: '8080' })).toMatchObject({
      options: { url: 'http://127.0.0.1:8080/webhooks' },
    });
  });

  it("posts a base URL's events to its /webhooks, and any other URL as given", () => {
    const urlOf = (url: string) => parseArgs(['e.json', '--url', url], { WEBHOOK_SECRET: 's1' });
    expect(urlOf('http://localhost:3555')).toMatchObject({ options: { url: 'http://localhost:3555/webhooks' } });
    expect(urlOf('https://engine.example/')).toMatchObject({ options: { url: 'https://engine.example/webhooks' } });
    expect(urlOf('http://localhost:3555/webhooks')).toMatchObject({ options: { url: 'http://localhost:3555/webhooks' } });
    expect(urlOf('http://proxy.example/engine-a/webhooks')).toMatchObject({ options: { url: 'http://proxy.example/engine-a/webhooks' } });
    expect(urlOf('http://localhost:3555/?probe=1')).toMatchObject({ options: { url: 'http://localhost:3555/?probe=1' } });
  });

  it('lets --secret win over WEBHOOK_SECRET', () => {
    expect(parseArgs(['e.json', '--secret', 'mine'], { WEBHOOK_SECRET: 'env' })).toMatchObject({ options: { secret: 'mine' } });
  });
});

describe('examples/events', () => {
  const dir = 'examples/events';
  it.each(readdirSync(dir).filter((f) => f.endsWith('.json')))('%s is an event envelope', (name) => {
    const event = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Record<string, unknown>;
    expect(event).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: expect.stringMatching(/^[a-z]+(\.[a-z_]+)+$/),
      created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      data: expect.any(Object),
    });
  });
});
