/**
 * Webhook intake end to end (SPEC section 4): every row of the answers table,
 * over real HTTP, on every database under test. Intake needs no service, so the
 * engine's SERVICE_API_URL points at a closed port and no rules are loaded.
 */
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { signBody } from '../src/intake/signature.js';
import { settledEvent } from './support/admin.js';
import { databasesUnderTest, type DatabaseKindUnderTest } from './support/databases.js';
import { TEST_ADMIN_TOKEN, TEST_SECRET, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver, type TestEvent } from './support/events.js';
import { useRig } from './support/fixture.js';

/** Nothing listens here: intake must not need the service. */
const CLOSED_SERVICE = 'http://127.0.0.1:9/v1';
const MiB = 1_048_576;
/** Jest applies its 5 s default here (the e2e project's testTimeout is not honoured), too short for a test that waits on PostgreSQL. */
const SLOW = 30_000;

const kinds = await databasesUnderTest('intake');

/** One engine for the describe block it is called in, on a fresh database of `kind`, with no rules and no service. */
function engineFor(kind: DatabaseKindUnderTest, env: Record<string, string> = {}): () => RunningEngine {
  const rig = useRig(kind, { per: 'block', simulator: false, engine: { env: { SERVICE_API_URL: CLOSED_SERVICE, ...env } } });
  return () => rig.engine;
}

const sha256Hex = (text: string | Buffer) => createHash('sha256').update(text).digest('hex');

/** Asserts an error answer: its status, its code, and exactly the shape {"error":{"code","message"}}. */
async function expectError(res: Response, status: number, code: string): Promise<void> {
  const text = await res.text();
  expect({ status: res.status, text }).toEqual({ status, text: expect.any(String) });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const answer = JSON.parse(text);
  expect(Object.keys(answer)).toEqual(['error']);
  expect(Object.keys(answer.error).sort()).toEqual(['code', 'message']);
  expect(answer.error).toEqual({ code, message: expect.any(String) });
  expect(answer.error.message.length).toBeGreaterThan(0);
  expect(text).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);
}

/** A task event whose JSON is exactly `bytes` long, padded in a note field. */
function anEventOfSize(bytes: number): string {
  const event = aTaskEvent('task.updated', {}, { note: '' } as Partial<TestEvent>) as TestEvent & { note: string };
  const base = Buffer.byteLength(JSON.stringify(event));
  event.note = 'x'.repeat(bytes - base);
  const text = JSON.stringify(event);
  expect(Buffer.byteLength(text)).toBe(bytes);
  return text;
}

/** POSTs a body in chunks without a Content-Length, so the size is only known while reading. */
function deliverChunked(engineUrl: string, chunks: string[], signature: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${engineUrl}/webhooks`,
      { method: 'POST', headers: { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'X-Service-Signature': signature } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    // The engine may close the connection once it has answered 413; the answer is what counts.
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe.each(kinds)('POST /webhooks on $name', (kind) => {
  describe('with the default configuration', () => {
    const engine = engineFor(kind);

    describe('a new event', () => {
      it('answers 202 with its id and stores it', async () => {
        const event = aTaskEvent('task.created');
        const res = await deliver(engine().url, event);
        expect(res.status).toBe(202);
        expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
        const stored = await engine().admin(`/admin/events/${event.id}`);
        expect(stored.status).toBe(200);
        expect(await body(stored)).toMatchObject({ id: event.id, type: 'task.created', source: 'webhook', payload: event });
      });

      it('accepts a signature in uppercase hex without the sha256= prefix', async () => {
        const event = aTaskEvent('task.created');
        const hex = signBody(JSON.stringify(event), TEST_SECRET).replace(/^sha256=/, '').toUpperCase();
        expect((await deliver(engine().url, event, { signature: hex })).status).toBe(202);
      });

      it('accepts and stores a type no rule listens to', async () => {
        const event = aTaskEvent('invoice.paid');
        expect((await deliver(engine().url, event)).status).toBe(202);
        expect(await settledEvent(engine(), event.id!)).toMatchObject({ type: 'invoice.paid', status: 'ignored' });
      }, SLOW);
    });

    describe('a duplicate', () => {
      it('answers 200 duplicate for the same id again', async () => {
        const event = aTaskEvent('task.created');
        expect((await deliver(engine().url, event)).status).toBe(202);
        const again = await deliver(engine().url, event);
        expect(again.status).toBe(200);
        expect(await body(again)).toEqual({ id: event.id, status: 'duplicate' });
      });

      it('is recognised by id alone, even with another body', async () => {
        const event = aTaskEvent('task.created');
        expect((await deliver(engine().url, event)).status).toBe(202);
        const changed = await deliver(engine().url, { ...event, type: 'task.updated' });
        expect(changed.status).toBe(200);
        expect(await body(changed)).toEqual({ id: event.id, status: 'duplicate' });
        expect(await body(engine().admin(`/admin/events/${event.id}`))).toMatchObject({ type: 'task.created' });
      });
    });

    describe('an event without an id', () => {
      it('gets the SHA-256 of its body as its id, and the same body again is a duplicate', async () => {
        const { id: _, ...event } = aTaskEvent('task.created');
        const text = JSON.stringify(event);
        const first = await deliver(engine().url, text);
        expect(first.status).toBe(202);
        expect(await body(first)).toEqual({ id: sha256Hex(text), status: 'accepted' });
        const second = await deliver(engine().url, text);
        expect(second.status).toBe(200);
        expect(await body(second)).toEqual({ id: sha256Hex(text), status: 'duplicate' });
        expect(await body(engine().admin(`/admin/events/${sha256Hex(text)}`))).toMatchObject({ id: sha256Hex(text), type: 'task.created' });
      });

      it('gets another id when the same event is sent with other whitespace', async () => {
        const { id: _, ...event } = aTaskEvent('task.created');
        const pretty = JSON.stringify(event, null, 2);
        const res = await deliver(engine().url, pretty);
        expect(res.status).toBe(202);
        expect(await body(res)).toEqual({ id: sha256Hex(pretty), status: 'accepted' });
        expect(sha256Hex(pretty)).not.toBe(sha256Hex(JSON.stringify(event)));
      });
    });

    describe('bad input', () => {
      const valid = () => JSON.stringify(aTaskEvent('task.created'));
      const signed = (text: string) => signBody(text, TEST_SECRET);

      it.each<[string, () => { text: string; signature: string | null }, number, string]>([
        ['no signature header', () => ({ text: valid(), signature: null }), 401, 'missing_signature'],
        ['an empty signature header', () => ({ text: valid(), signature: '' }), 401, 'missing_signature'],
        ['a signature made with another secret', () => ({ text: valid(), signature: signBody(valid(), 'not-the-secret') }), 401, 'invalid_signature'],
        ['a signature of another body', () => ({ text: valid(), signature: signed(valid()) }), 401, 'invalid_signature'],
        ['a signature of 63 hex characters', () => {
          const text = valid();
          return { text, signature: signed(text).slice(0, -1) };
        }, 401, 'invalid_signature'],
        ['a signature of 65 hex characters', () => {
          const text = valid();
          return { text, signature: `${signed(text)}0` };
        }, 401, 'invalid_signature'],
        ['a signature that is not hex', () => ({ text: valid(), signature: `sha256=${'z'.repeat(64)}` }), 401, 'invalid_signature'],
        ['a timestamped signature the engine is not configured for', () => {
          const text = valid();
          return { text, signature: signBody(text, TEST_SECRET, 'timestamped') };
        }, 401, 'invalid_signature'],
        ['a body that is not JSON and no signature (signature first)', () => ({ text: 'not json', signature: null }), 401, 'missing_signature'],
        ['a signed body that is not JSON', () => ({ text: 'not json', signature: signed('not json') }), 400, 'invalid_json'],
        ['a signed empty body', () => ({ text: '', signature: signed('') }), 400, 'invalid_json'],
        ['a signed truncated JSON body', () => ({ text: '{"type":"task.created"', signature: signed('{"type":"task.created"') }), 400, 'invalid_json'],
        ['a signed array', () => {
          const text = `[${valid()}]`;
          return { text, signature: signed(text) };
        }, 400, 'invalid_event'],
        ['a signed string', () => ({ text: '"task.created"', signature: signed('"task.created"') }), 400, 'invalid_event'],
        ['a signed null', () => ({ text: 'null', signature: signed('null') }), 400, 'invalid_event'],
        ['a signed event without a type', () => {
          const text = JSON.stringify({ ...aTaskEvent('x'), type: undefined });
          return { text, signature: signed(text) };
        }, 400, 'invalid_event'],
        ['a signed event with a numeric id', () => {
          const text = JSON.stringify({ ...aTaskEvent('task.created'), id: 42 });
          return { text, signature: signed(text) };
        }, 400, 'invalid_event'],
        ['a signed event whose data is a list', () => {
          const text = JSON.stringify({ ...aTaskEvent('task.created'), data: [] });
          return { text, signature: signed(text) };
        }, 400, 'invalid_event'],
      ])('refuses %s', async (_, make, status, code) => {
        const { text, signature } = make();
        await expectError(await deliver(engine().url, text, { signature }), status, code);
      });

      it('refuses a 2 MiB body with 413 under the default limit of 1 MiB', async () => {
        const text = anEventOfSize(2 * MiB);
        await expectError(await deliver(engine().url, text), 413, 'payload_too_large');
      });

      it('accepts an event of exactly 1 MiB under the default limit', async () => {
        const text = anEventOfSize(MiB);
        expect((await deliver(engine().url, text)).status).toBe(202);
      });

      it('stores nothing it refused', async () => {
        const event = aTaskEvent('task.created');
        await deliver(engine().url, event, { secret: 'not-the-secret' });
        await expectError(await engine().admin(`/admin/events/${event.id}`), 404, 'not_found');
      });
    });

    describe('prototype pollution', () => {
      it('accepts and stores a __proto__ payload without polluting any object', async () => {
        const id = `evt_proto_${sha256Hex(String(Math.random())).slice(0, 12)}`;
        const text =
          `{"id":"${id}","type":"task.updated","__proto__":{"polluted":"yes"},` +
          `"constructor":{"prototype":{"polluted":"yes"}},` +
          `"data":{"task":{"id":"tsk_proto","__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}}}`;
        const res = await deliver(engine().url, text);
        expect(res.status).toBe(202);
        expect(await body(res)).toEqual({ id, status: 'accepted' });
        const detail = await settledEvent(engine(), id);
        expect(detail).toMatchObject({ id, type: 'task.updated', resource: 'task:tsk_proto' });
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        expect(Object.prototype.hasOwnProperty.call(detail.payload, '__proto__')).toBe(false);
      }, SLOW);
    });

    describe('deep nesting', () => {
      it('refuses an event nested 10,000 levels deep as invalid_event and stays up', async () => {
        const event = aTaskEvent('task.updated');
        const deep = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
        const res = await deliver(engine().url, JSON.stringify(event).replace(/}$/, `,"deep":${deep}}`));
        expect(res.status).toBe(400);
        expect((await body(res)).error.code).toBe('invalid_event');
        expect((await fetch(`${engine().url}/health`)).status).toBe(200);
      });
    });

    describe('after all the bad input', () => {
      it('is still healthy and still accepts and stores a valid event', async () => {
        const health = await fetch(`${engine().url}/health`);
        expect(health.status).toBe(200);
        expect(await body(health)).toEqual({ status: 'ok' });
        const event = aTaskEvent('task.completed');
        expect((await deliver(engine().url, event)).status).toBe(202);
        expect(await settledEvent(engine(), event.id!)).toMatchObject({ id: event.id, type: 'task.completed', status: 'ignored' });
      }, SLOW);

      it('never wrote the webhook secret or the admin token to its log', () => {
        const log = engine().logs.join('');
        expect(engine().logs.length).toBeGreaterThan(0);
        expect(log).not.toContain(TEST_SECRET);
        expect(log).not.toContain(TEST_ADMIN_TOKEN);
      });
    });
  });

  describe('with WEBHOOK_MAX_BYTES=1024', () => {
    const engine = engineFor(kind, { WEBHOOK_MAX_BYTES: '1024' });

    it.each([
      ['1024 bytes', 202, 1024],
      ['1025 bytes', 413, 1025],
      ['64 KiB', 413, 65_536],
    ])('answers a signed body of %s with %i', async (_, status, size) => {
      const res = await deliver(engine().url, anEventOfSize(size));
      if (status === 202) expect(res.status).toBe(202);
      else await expectError(res, 413, 'payload_too_large');
    });

    it('refuses a chunked body without Content-Length once it passes the limit', async () => {
      const text = anEventOfSize(4096);
      const chunks = text.match(/[\s\S]{1,512}/g) ?? [];
      const res = await deliverChunked(engine().url, chunks, signBody(text, TEST_SECRET));
      expect(res.status).toBe(413);
      expect(JSON.parse(res.text)).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
    });

    it('refuses an oversized body before looking at its signature', async () => {
      await expectError(await deliver(engine().url, anEventOfSize(2048), { signature: null }), 413, 'payload_too_large');
    });
  });

  describe('without WEBHOOK_SECRET', () => {
    const engine = engineFor(kind, { WEBHOOK_SECRET: '' });

    it.each<[string, string | null]>([
      ['a signed event', signBody(JSON.stringify(aTaskEvent('task.created')), TEST_SECRET)],
      ['an unsigned event', null],
    ])('answers 503 webhook_secret_not_configured to %s', async (_, signature) => {
      const res = await deliver(engine().url, JSON.stringify(aTaskEvent('task.created')), { signature });
      await expectError(res, 503, 'webhook_secret_not_configured');
    });

    it('is otherwise up', async () => {
      expect((await fetch(`${engine().url}/health`)).status).toBe(200);
    });
  });

  describe('with WEBHOOK_SIGNATURE_SCHEME=timestamped', () => {
    const engine = engineFor(kind, { WEBHOOK_SIGNATURE_SCHEME: 'timestamped', WEBHOOK_TOLERANCE_SECONDS: '300' });
    const signedAt = (text: string, secondsAgo: number) =>
      signBody(text, TEST_SECRET, 'timestamped', new Date(Date.now() - secondsAgo * 1000));

    it('accepts an event signed now', async () => {
      const event = aTaskEvent('task.created');
      const res = await deliver(engine().url, event, { scheme: 'timestamped' });
      expect(res.status).toBe(202);
      expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
    });

    it('accepts an event signed a minute ago', async () => {
      const text = JSON.stringify(aTaskEvent('task.created'));
      expect((await deliver(engine().url, text, { signature: signedAt(text, 60) })).status).toBe(202);
    });

    it.each<[string, (text: string) => string | null]>([
      ['signed ten minutes ago', (text) => signedAt(text, 600)],
      ['signed ten minutes in the future', (text) => signedAt(text, -600)],
      ['signed without a t=', (text) => signedAt(text, 0).replace(/^t=\d+,/, '')],
      ['signed with the plain hmac-sha256 scheme', (text) => signBody(text, TEST_SECRET)],
      ['signed with another secret', (text) => signBody(text, 'not-the-secret', 'timestamped')],
    ])('refuses an event %s with 401 invalid_signature', async (_, sign) => {
      const text = JSON.stringify(aTaskEvent('task.created'));
      await expectError(await deliver(engine().url, text, { signature: sign(text) }), 401, 'invalid_signature');
    });

    it('answers missing_signature without a header', async () => {
      await expectError(await deliver(engine().url, aTaskEvent('task.created'), { signature: null }), 401, 'missing_signature');
    });
  });

  describe('with two secrets during a rotation (WEBHOOK_SECRET=old,new)', () => {
    const engine = engineFor(kind, { WEBHOOK_SECRET: 'old-secret-value,new-secret-value' });

    it.each(['old-secret-value', 'new-secret-value'])('accepts an event signed with %s', async (secret) => {
      const event = aTaskEvent('task.created');
      const res = await deliver(engine().url, event, { secret });
      expect(res.status).toBe(202);
      expect(await body(res)).toEqual({ id: event.id, status: 'accepted' });
    });

    it('refuses an event signed with neither', async () => {
      await expectError(await deliver(engine().url, aTaskEvent('task.created'), { secret: TEST_SECRET }), 401, 'invalid_signature');
    });

    it('refuses an event signed with both secrets joined', async () => {
      const res = await deliver(engine().url, aTaskEvent('task.created'), { secret: 'old-secret-value,new-secret-value' });
      await expectError(res, 401, 'invalid_signature');
    });
  });
});
