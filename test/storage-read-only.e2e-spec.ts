/**
 * A database the engine may read but not write.
 *
 * At start the engine refuses to run, with a message that says which database
 * and why, and it starts once the database is writable again: a read-only
 * SQLite file (immutable, `chattr +i`, since root ignores file modes), the
 * SQLite file's file system mounted read-only, a PostgreSQL database that
 * refuses writes.
 *
 * During a run, webhooks and admin writes are refused with 503
 * storage_unavailable and Retry-After, and the engine recovers by itself when
 * the database is writable again: on PostgreSQL, a database that starts and then
 * stops refusing writes. (A SQLite file cannot be made read-only under a running
 * engine from outside: the engine's open descriptor keeps its write access
 * whatever the file's mode or attributes, and a file system with a file open
 * for writing cannot be remounted read-only. What does happen is the file
 * system failing under it: see storage-io-error.e2e-spec.ts.)
 */
import { createApp } from '../src/app.js';
import { loadConfig, secretsOf } from '../src/config/config.js';
import { JsonLogger, Redactor } from '../src/observability/json-logger.js';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { engineEnv, rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { canMakeDiskFaults, refuseWrites, SmallDisk, takeWrites } from './support/storage-faults.js';
import { watchLog } from './support/secret-watch.js';
import { waitUntil } from './support/wait.js';

const PREFIX = 'Written: ';
const HOOK_TIMEOUT = 60_000;

const rule = {
  id: 'written',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } }],
};
/** A rule to disable and enable (an admin write) without touching the one under test. */
const bystander = { id: 'bystander', on: 'project.created', actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Bystander' } }] };

/** Starts an engine that is expected not to start; resolves with why it did not, after letting go of everything it opened. */
async function startFailure(env: Record<string, string>): Promise<{ message: string; log: string[] }> {
  const config = loadConfig(engineEnv(env), () => 'generated-admin-token-for-tests');
  const log: string[] = [];
  watchLog('an engine that should not start', log);
  let app: Awaited<ReturnType<typeof createApp>> | undefined;
  try {
    app = await createApp(config, { logger: new JsonLogger('warn', new Redactor(secretsOf(config)), (line) => log.push(line)) });
    await app.listen(0, '127.0.0.1');
  } catch (error) {
    return { message: (error as Error).message, log };
  } finally {
    await app?.close().catch(() => undefined);
  }
  throw new Error('the engine started on a database it cannot write');
}

const kinds = await databasesUnderTest('storage: a read-only database');
const diskFaults = await canMakeDiskFaults('storage: a read-only database');

describe('an engine started on a database it cannot write', () => {
  let sim: Simulator;
  let engine: RunningEngine | undefined;

  beforeAll(async () => {
    sim = await startSimulator({ seed: true });
  });

  afterEach(async () => {
    await engine?.stop();
    engine = undefined;
  }, HOOK_TIMEOUT);

  afterAll(async () => {
    await sim?.close();
  });

  const env = (url: string) => ({ DATABASE_URL: url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([rule]) });

  /** Starts on `url`, delivers one event, and waits for its action: the engine works there. */
  async function works(url: string): Promise<void> {
    engine = await startEngine(env(url));
    const event = aTaskEvent('task.completed');
    expect((await deliver(engine.url, event)).status).toBe(202);
    await waitUntil(() => [...sim.state.tasks.values()].some((t) => t.title === `${PREFIX}${event.id}`), { what: 'the event to act' });
    await engine.stop();
    engine = undefined;
  }

  (diskFaults ? describe : describe.skip)('on SQLite', () => {
    let disk: SmallDisk;

    beforeEach(async () => {
      disk = await SmallDisk.mount('16m');
    });

    afterEach(async () => {
      await engine?.stop();
      engine = undefined;
      await disk.unmount();
    }, HOOK_TIMEOUT);

    it.each([
      ['a read-only file (chattr +i)', (on: boolean) => disk.immutable(on)],
      ['its file system mounted read-only', (on: boolean) => disk.remount(on ? 'ro' : 'rw')],
    ])('refuses to start on %s, saying why, and starts once it is writable', async (_, readOnly) => {
      await works(disk.url); // the database exists, with the engine's schema
      await readOnly(true);
      const failure = await startFailure(env(disk.url));
      expect(failure.message).toContain(`the database sqlite:${disk.file} cannot be written (read_only: `);
      expect(failure.message).toContain('the engine needs a writable database');
      await readOnly(false);
      await works(disk.url);
    }, 60_000);
  });

  if (kinds.some((kind) => kind.name === 'postgres')) {
    describe('on PostgreSQL', () => {
      let db: TestDatabase;

      beforeEach(async () => {
        db = await kinds.find((kind) => kind.name === 'postgres')!.create();
      }, HOOK_TIMEOUT);

      afterEach(async () => {
        await engine?.stop();
        engine = undefined;
        await takeWrites(db.url).catch(() => undefined);
        await db.drop();
      }, HOOK_TIMEOUT);

      it('refuses to start on a database that refuses writes, saying why, and starts once it takes them', async () => {
        await works(db.url);
        await refuseWrites(db.url);
        const failure = await startFailure(env(db.url));
        expect(failure.message).toMatch(/^the database postgres:\/\/127\.0\.0\.1:5432\/\w+ cannot be written \(read_only: /);
        expect(failure.message).not.toMatch(/postgres@/); // no credentials in messages
        await takeWrites(db.url);
        await works(db.url);
      }, 60_000);
    });
  }
});

describe.each(kinds.filter((kind) => kind.name === 'postgres'))('an engine on $name whose database turns read-only during a run', (kind) => {
  let db: TestDatabase;
  let sim: Simulator;
  let engine: RunningEngine;

  beforeAll(async () => {
    db = await kind.create();
    sim = await startSimulator({ seed: true });
    engine = await startEngine({ DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([rule, bystander]) });
  }, HOOK_TIMEOUT);

  afterAll(async () => {
    await engine?.stop();
    await sim?.close();
    await takeWrites(db.url).catch(() => undefined);
    await db?.drop();
  }, HOOK_TIMEOUT);

  it('refuses webhooks and admin writes with 503 while it is, and takes them again by itself after', async () => {
    const acknowledged: TestEvent[] = [];
    for (let i = 0; i < 20; i++) {
      const event = aTaskEvent('task.completed');
      expect((await deliver(engine.url, event)).status).toBe(202);
      acknowledged.push(event);
    }

    await refuseWrites(db.url);
    const refusals = [
      await deliver(engine.url, aTaskEvent('task.completed')),
      await engine.admin('/admin/events', { method: 'POST', body: JSON.stringify(aTaskEvent('task.completed')) }),
      await engine.admin('/admin/rules/bystander/disable', { method: 'POST' }),
    ];
    for (const answer of refusals) {
      const { error } = (await answer.json()) as { error: { code: string } };
      expect({ status: answer.status, retryAfter: answer.headers.get('retry-after'), code: error.code }).toEqual({
        status: 503,
        retryAfter: '5',
        code: 'storage_unavailable',
      });
    }
    expect((await fetch(`${engine.url}/health/ready`)).status).toBe(503);

    await takeWrites(db.url);
    const writable = Date.now();
    const next = aTaskEvent('task.completed');
    await waitUntil(async () => (await deliver(engine.url, next)).status === 202, { timeoutMs: 5_000, intervalMs: 50, what: 'a webhook to be acknowledged again' });
    expect(Date.now() - writable).toBeLessThan(5_000);
    acknowledged.push(next);
    // A pooled session opened while the database refused writes refuses its first write too (503) and is replaced:
    // an admin write may meet one or two of those before a fresh session takes it.
    await waitUntil(async () => (await engine.admin('/admin/rules/bystander/disable', { method: 'POST' })).status === 200, {
      timeoutMs: 5_000, intervalMs: 50, what: 'an admin write to go through again',
    });

    const expected = acknowledged.map((e) => `${PREFIX}${e.id}`).sort();
    const created = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));
    await waitUntil(() => created().length >= expected.length, { timeoutMs: 30_000, what: `${expected.length} tasks` });
    await waitUntil(async () => (await fetch(`${engine.url}/health/ready`)).status === 200, { timeoutMs: 5_000, what: 'ready again' });
    expect(created().sort()).toEqual(expected);
  }, 60_000);
});
