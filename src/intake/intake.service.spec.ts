import { DomainError } from '../errors.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { CORE_SECRET, openCore, taskEvent, type Core } from '../../test/support/core.js';
import { EventEntity } from '../database/event.entity.js';
import { IntakeService } from './intake.service.js';
import { signBody } from './signature.js';

const kinds = await databasesUnderTest('intake service');

/** The error a refused call threw, as the exception filter would answer it. */
async function refusal(work: Promise<unknown>): Promise<{ code: string; status: number }> {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(DomainError);
  return { code: (error as DomainError).code, status: (error as DomainError).status };
}

describe.each(kinds)(`${IntakeService.name} on $name`, (kind) => {
  let core: Core;

  beforeEach(async () => {
    core = await openCore(kind);
  });

  afterEach(() => core.close());

  const stored = () => core.db.manager.find(EventEntity, { order: { seq: 'ASC' } });
  const textOf = (body: unknown) => (typeof body === 'string' ? body : JSON.stringify(body));

  /** Delivers `body` as the service does, signed with `secret`. */
  function webhook(body: unknown, secret = CORE_SECRET) {
    const text = textOf(body);
    return core.intake.receiveWebhook(Buffer.from(text), signBody(text, secret));
  }

  describe('a webhook signed with the configured secret', () => {
    it('is stored once, byte for byte, about the resource it names', async () => {
      const event = taskEvent('task.completed', { id: 'tsk_42' });
      expect(await webhook(event)).toEqual({ id: event.id, status: 'accepted' });

      expect(await stored()).toEqual([
        expect.objectContaining({
          eventId: event.id, type: 'task.completed', resourceKey: 'task:tsk_42', source: 'webhook',
          status: 'received', payload: JSON.stringify(event), receivedAt: core.clock.now().toISOString(),
        }),
      ]);
    });

    it('is a duplicate when delivered again, even several times at once, and stays one row', async () => {
      const event = taskEvent('task.completed');
      await webhook(event);
      const again = await Promise.all([webhook(event), webhook(event), webhook(event)]);

      expect(again.map((r) => r.status)).toEqual(['duplicate', 'duplicate', 'duplicate']);
      expect(await core.db.manager.countBy(EventEntity, { eventId: event.id })).toBe(1);
    });
  });

  describe('a webhook whose signature does not hold', () => {
    it('is refused as invalid_signature when signed with another secret, and nothing is stored', async () => {
      expect(await refusal(webhook(taskEvent('task.completed'), 'whsec_someone_else_entirely'))).toEqual({ code: 'invalid_signature', status: 401 });
      expect(await stored()).toEqual([]);
      const received = await core.metrics.eventsReceived.get();
      expect(received.values).toEqual([expect.objectContaining({ labels: { type: 'unknown', outcome: 'invalid_signature' }, value: 1 })]);
    });

    it('is refused as invalid_signature when the body changed after signing', async () => {
      const text = JSON.stringify(taskEvent('task.completed'));
      const signature = signBody(text, CORE_SECRET);
      const tampered = Buffer.from(text.replace('Write docs', 'Delete all'));
      expect(await refusal(core.intake.receiveWebhook(tampered, signature))).toEqual({ code: 'invalid_signature', status: 401 });
      expect(await stored()).toEqual([]);
    });

    it('is refused as missing_signature without a signature', async () => {
      const text = JSON.stringify(taskEvent('task.completed'));
      expect(await refusal(core.intake.receiveWebhook(Buffer.from(text), undefined))).toEqual({ code: 'missing_signature', status: 401 });
      expect(await stored()).toEqual([]);
    });
  });

  describe('a signed body that is not an event', () => {
    it.each([
      ['invalid_json', 'not JSON', '{"type": "task.completed",'],
      ['invalid_event', 'a JSON array', '[1, 2]'],
      ['invalid_event', 'an object without a type', '{"id": "evt_1", "data": {}}'],
      ['invalid_event', 'an event whose data is not an object', '{"id": "evt_1", "type": "task.completed", "data": 7}'],
    ])('is refused as %s when it is %s, and nothing is stored', async (code, _what, body) => {
      expect(await refusal(webhook(body))).toEqual({ code, status: 400 });
      expect(await stored()).toEqual([]);
    });
  });

  describe('an injection through the admin API', () => {
    it('needs no signature, is stored as from the admin, and is a duplicate the second time', async () => {
      const event = taskEvent('task.created');
      const raw = Buffer.from(JSON.stringify(event));
      expect(await core.intake.accept(raw, 'admin')).toEqual({ id: event.id, status: 'accepted' });
      expect(await core.intake.accept(raw, 'admin')).toEqual({ id: event.id, status: 'duplicate' });

      expect((await stored()).map((e) => [e.eventId, e.source])).toEqual([[event.id, 'admin']]);
    });

    it('still refuses what is not an event', async () => {
      expect(await refusal(core.intake.accept(Buffer.from('{"data": {}}'), 'admin'))).toEqual({ code: 'invalid_event', status: 400 });
      expect(await stored()).toEqual([]);
    });
  });

  describe('a replay of a stored event', () => {
    it('stores a copy under a new id, linked to the original', async () => {
      const event = taskEvent('task.completed', { id: 'tsk_7' });
      await webhook(event);
      const replay = await core.intake.replay(event.id);

      expect(replay).toEqual({ id: expect.stringMatching(new RegExp(`^${event.id}:replay:[0-9a-f]{8}$`)), status: 'accepted', replay_of: event.id });
      const copy = (await stored())[1];
      expect(copy).toMatchObject({ eventId: replay.id, source: 'replay', replayOf: event.id, resourceKey: 'task:tsk_7' });
      expect(JSON.parse(copy.payload)).toEqual({ ...event, id: replay.id });
    });

    it('is refused as not_found for an event never stored', async () => {
      expect(await refusal(core.intake.replay('evt_never_seen'))).toEqual({ code: 'not_found', status: 404 });
    });
  });
});

describe.each(kinds)(`${IntakeService.name} on $name, configured otherwise`, (kind) => {
  let core: Core | undefined;

  afterEach(() => core?.close());

  it('refuses every webhook while no secret is configured (nothing could be verified)', async () => {
    core = await openCore(kind, { env: { WEBHOOK_SECRET: undefined } });
    const text = JSON.stringify(taskEvent('task.completed'));
    const refused = await refusal(core.intake.receiveWebhook(Buffer.from(text), signBody(text, CORE_SECRET)));
    expect(refused).toEqual({ code: 'webhook_secret_not_configured', status: 503 });
  });

  it('refuses webhooks once it stops accepting (shutdown)', async () => {
    core = await openCore(kind);
    core.intake.stopAccepting();
    const text = JSON.stringify(taskEvent('task.completed'));
    expect(await refusal(core.intake.receiveWebhook(Buffer.from(text), signBody(text, CORE_SECRET)))).toEqual({ code: 'shutting_down', status: 503 });
  });

  it('with timestamped signatures, takes one signed within the tolerance and refuses an older one, by the engine’s clock', async () => {
    core = await openCore(kind, { env: { WEBHOOK_SIGNATURE_SCHEME: 'timestamped', WEBHOOK_TOLERANCE_SECONDS: '300' } });
    const fresh = JSON.stringify(taskEvent('task.completed'));
    const stale = JSON.stringify(taskEvent('task.completed'));
    const now = core.clock.now();
    const intake = core.intake;
    const signedAt = (text: string, msAgo: number) => signBody(text, CORE_SECRET, 'timestamped', new Date(now.getTime() - msAgo));

    expect((await intake.receiveWebhook(Buffer.from(fresh), signedAt(fresh, 299_000))).status).toBe('accepted');
    expect(await refusal(intake.receiveWebhook(Buffer.from(stale), signedAt(stale, 301_000)))).toEqual({ code: 'invalid_signature', status: 401 });
    expect(await core.db.manager.count(EventEntity)).toBe(1);
  });
});
