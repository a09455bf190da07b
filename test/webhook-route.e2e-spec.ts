/**
 * POST /webhooks is served by node:http in front of Express and Nest
 * (src/intake/webhook-route.ts); other spellings of the path (`/webhooks/`)
 * still reach the Nest controller. Both must answer alike, byte for byte in
 * the body and in every header a sender reads, so neither can drift from the
 * other unnoticed. Express's ETag alone is left out of the fast route's answers
 * (a SHA-1 of each, for a header no sender of a webhook reads).
 */
import { signBody } from '../src/intake/signature.js';
import { databasesUnderTest, type DatabaseKindUnderTest } from './support/databases.js';
import { TEST_SECRET, type RunningEngine } from './support/engine.js';
import { aTaskEvent } from './support/events.js';
import { useRig } from './support/fixture.js';

const kinds = await databasesUnderTest('webhook route');
const SLOW = 30_000;

function engineFor(kind: DatabaseKindUnderTest): () => RunningEngine {
  const rig = useRig(kind, { per: 'block', simulator: false, engine: { env: { SERVICE_API_URL: 'http://127.0.0.1:9/v1', WEBHOOK_MAX_BYTES: '1024' } } });
  return () => rig.engine;
}

interface Answer {
  status: number;
  body: string;
  etag: string | null;
  headers: Record<string, string | null>;
}

async function post(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });
  const read = ['content-type', 'content-length', 'retry-after', 'connection'];
  return { status: res.status, body: await res.text(), etag: res.headers.get('etag'), headers: Object.fromEntries(read.map((name) => [name, res.headers.get(name)])) };
}

/** The answer as the other route's is compared with it: everything but the ETag. */
const compared = ({ etag: _etag, ...answer }: Answer) => answer;

describe.each(kinds)('POST /webhooks answered in front of Nest on $name', (kind) => {
  const engine = engineFor(kind);
  /** The same request on the fast route and through Express to the controller. */
  const both = async (body: string, headers: Record<string, string>) => [
    await post(`${engine().url}/webhooks`, body, headers),
    await post(`${engine().url}/webhooks/`, body, headers),
  ];

  it('answers a duplicate exactly as the controller does', async () => {
    const event = JSON.stringify(aTaskEvent('task.updated'));
    const signature = signBody(event, TEST_SECRET);
    const first = await post(`${engine().url}/webhooks`, event, { 'X-Service-Signature': signature });
    expect(first).toMatchObject({ status: 202, body: JSON.stringify({ id: JSON.parse(event).id, status: 'accepted' }) });
    expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(first.etag).toBeNull();
    const [fast, nest] = await both(event, { 'X-Service-Signature': signature });
    expect(fast).toMatchObject({ status: 200, body: JSON.stringify({ id: JSON.parse(event).id, status: 'duplicate' }) });
    expect(compared(fast)).toEqual(compared(nest));
    expect(nest.etag).toMatch(/^W\/"[0-9a-f]+-[A-Za-z0-9+/]{27}"$/);
    expect(fast.etag).toBeNull();
  }, SLOW);

  it('writes an id that JSON must escape as the controller does', async () => {
    const id = `evt "quoted" \\ back\tslash \u2028 ü ${Date.now()}`;
    const event = JSON.stringify({ ...aTaskEvent('task.updated'), id });
    const signature = signBody(event, TEST_SECRET);
    const first = await post(`${engine().url}/webhooks`, event, { 'X-Service-Signature': signature });
    expect(first.status).toBe(202);
    expect(JSON.parse(first.body)).toEqual({ id, status: 'accepted' });
    expect(first.body).toBe(JSON.stringify({ id, status: 'accepted' }));
    const [fast, nest] = await both(event, { 'X-Service-Signature': signature });
    expect(compared(fast)).toEqual(compared(nest));
  }, SLOW);

  it.each([
    ['no signature', {}, 401],
    ['a wrong signature', { 'X-Service-Signature': `sha256=${'0'.repeat(64)}` }, 401],
  ])('refuses %s exactly as the controller does', async (_name, headers, status) => {
    const [fast, nest] = await both(JSON.stringify(aTaskEvent('task.updated')), headers);
    expect(fast.status).toBe(status);
    expect(compared(fast)).toEqual(compared(nest));
  }, SLOW);

  it('refuses JSON that is not an event, and a body past WEBHOOK_MAX_BYTES (closing the connection), exactly as the controller does', async () => {
    const notAnEvent = '[1, 2]';
    const [fastBad, nestBad] = await both(notAnEvent, { 'X-Service-Signature': signBody(notAnEvent, TEST_SECRET) });
    expect(JSON.parse(fastBad.body)).toEqual({ error: { code: 'invalid_event', message: expect.any(String) } });
    expect(compared(fastBad)).toEqual(compared(nestBad));
    const big = JSON.stringify(aTaskEvent('task.updated', { title: 'x'.repeat(2_000) }));
    const [fastBig, nestBig] = await both(big, { 'X-Service-Signature': signBody(big, TEST_SECRET) });
    expect(fastBig).toMatchObject({ status: 413, headers: { connection: 'close' } });
    expect(compared(fastBig)).toEqual(compared(nestBig));
  }, SLOW);
});
