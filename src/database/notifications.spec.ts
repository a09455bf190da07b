import { cuttableProxy } from '../../test/support/cuttable-proxy.js';
import { createPostgresDatabase, databasesUnderTest, withPostgresClient, type TestDatabase } from '../../test/support/databases.js';
import { waitUntil } from '../wait.js';
import { ChannelListener, LISTENER_APPLICATION_NAME, RULES_CHANNEL, withoutPassword } from './notifications.js';

const onPostgres = (await databasesUnderTest('rule change notifications: the listener')).some((kind) => kind.name === 'postgres') ? describe : describe.skip;

function recorder() {
  const entries: Array<{ level: 'log' | 'warn'; entry: unknown }> = [];
  const logger = {
    log: (entry: unknown) => void entries.push({ level: 'log', entry }),
    warn: (entry: unknown) => void entries.push({ level: 'warn', entry }),
  };
  return { entries, logger, text: () => JSON.stringify(entries) };
}

const notify = (url: string, channel: string, payload: string) => withPostgresClient(url, (c) => c.query('SELECT pg_notify($1, $2)', [channel, payload]));

describe(withoutPassword.name, () => {
  it.each([
    ['the password as written', 'postgres://engine:s3cret@db/x', 'bad s3cret here', 'bad *** here'],
    ['the password decoded', 'postgres://engine:p%40ss@db/x', 'bad p@ss here', 'bad *** here'],
    ['no password', 'postgres://engine@db/x', 'bad engine here', 'bad engine here'],
    ['an unreadable URL', 'not a url', 'bad here', 'bad here'],
  ])('removes %s from a message', (_, url, message, expected) => {
    expect(withoutPassword(message, url)).toBe(expected);
  });
});

onPostgres(ChannelListener.name, () => {
  let db: TestDatabase;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    db = await createPostgresDatabase();
  }, 30_000);

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await db.drop();
  }, 30_000);

  function listen(url: string) {
    const heard: string[] = [];
    let resumed = 0;
    const log = recorder();
    const listener = new ChannelListener(url, RULES_CHANNEL, { notified: (payload) => heard.push(payload), resumed: () => resumed++ }, log.logger);
    cleanups.push(() => listener.close());
    return { listener, heard, log, resumed: () => resumed };
  }

  const listenerConnections = () =>
    withPostgresClient(db.url, async (c) =>
      Number((await c.query(`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, [LISTENER_APPLICATION_NAME])).rows[0].n),
    );

  it('passes on the notifications of its channel, and only those', async () => {
    const { listener, heard } = listen(db.url);
    await listener.start();
    expect(listener.listening).toBe(true);
    await notify(db.url, 'another_channel', 'not for it');
    await notify(db.url, RULES_CHANNEL, 'replica-a');
    await waitUntil(() => heard.length > 0, { what: 'a notification' });
    expect(heard).toEqual(['replica-a']);
  });

  it('reconnects with growing delays, logs the outage once without the password, and says when it listens again', async () => {
    const proxy = await cuttableProxy(db.url);
    cleanups.push(() => proxy.close());
    const through = new URL(proxy.through(db.url));
    through.username = 'postgres';
    through.password = 'not-the-password-4711'; // trust auth: ignored by the server, and never logged
    const { listener, heard, log, resumed } = listen(through.toString());
    await listener.start();

    proxy.cut();
    await waitUntil(() => proxy.attemptsWhileDown.length >= 4, { what: 'four attempts to reconnect' });
    expect(log.entries.filter((e) => e.level === 'warn')).toHaveLength(1);
    expect(listener.listening).toBe(false);
    const [first, second, third, fourth] = proxy.attemptsWhileDown as [number, number, number, number];
    expect(fourth - third).toBeGreaterThan(second - first); // backoff, not a tight loop

    proxy.restore();
    await waitUntil(() => resumed() === 1, { timeoutMs: 10_000, what: 'the listener to say it listens again' });
    expect(listener.listening).toBe(true);
    await notify(db.url, RULES_CHANNEL, 'after the outage');
    await waitUntil(() => heard.includes('after the outage'), { what: 'a notification after the outage' });
    expect(log.entries.map((e) => e.level)).toEqual(['warn', 'log']);
    expect(log.text()).not.toContain('not-the-password-4711');
  });

  it('keeps trying when PostgreSQL is not there at start, and closes for good', async () => {
    const proxy = await cuttableProxy(db.url);
    cleanups.push(() => proxy.close());
    proxy.cut();
    const { listener, log, resumed } = listen(proxy.through(db.url));
    await listener.start(); // does not throw: the engine starts, and polling covers meanwhile
    expect(listener.listening).toBe(false);
    proxy.restore();
    await waitUntil(() => resumed() === 1, { timeoutMs: 10_000, what: 'the listener to connect once PostgreSQL answers' });
    expect(await listenerConnections()).toBe(1);
    expect(log.entries.map((e) => e.level)).toEqual(['warn', 'log']);

    await listener.close();
    await waitUntil(async () => (await listenerConnections()) === 0, { what: 'the listener connection to close' });
    expect(listener.listening).toBe(false);
  });
});
