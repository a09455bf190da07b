/**
 * SIGKILL in the middle of a burst: the engine runs as a real child process on a
 * database file (or PostgreSQL), is killed while events are arriving and actions
 * are being sent, and is started again on the same database, as often as the
 * test says. Every event it acknowledged must end with its action done exactly
 * once at the service. Deliveries that found the engine down are sent again, as
 * the service retries webhooks that got no answer.
 */
import { existsSync } from 'node:fs';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { rulesDir, spawnEngine, type EngineProcess } from './support/engine.js';
import { aTaskEvent, deliver, waitFor, type TestEvent } from './support/events.js';
import { freePort } from './support/round-trip.js';

const BURST = 300;
const SENDERS = 16;
const PREFIX = 'Review: ';
/** Jest applies its 5 s default to hooks unless told otherwise. */
const SLOW = 30_000;

const rule = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } }],
};

/**
 * Where the kills fall: after this many acknowledgements, one point drawn at
 * random in each window, so every run kills at other moments (the points are
 * printed with a failure, to replay one).
 */
function killPoints(windows: Array<[number, number]>): number[] {
  return windows.map(([from, to]) => from + Math.floor(Math.random() * (to - from + 1)));
}

/**
 * Delivers every event until each one is acknowledged (202 or 200 duplicate),
 * with `SENDERS` concurrent senders; a delivery that fails (the engine is down)
 * goes back in the queue. Calls `onAck` after each acknowledgement, and
 * `check` before each delivery (it throws to give up, e.g. when the engine
 * could not be started again).
 */
async function deliverAll(url: string, events: TestEvent[], acknowledged: Set<string>, onAck: () => void, check: () => void): Promise<void> {
  const queue = [...events];
  let inFlight = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      for (;;) {
        check();
        const event = queue.shift();
        if (!event) {
          if (inFlight === 0) return;
          await new Promise((r) => setTimeout(r, 20)); // another sender's delivery may still fail and come back
          continue;
        }
        inFlight++;
        const status = await deliver(url, event).then((res) => res.status, () => 0);
        inFlight--;
        if (status === 202 || status === 200) {
          acknowledged.add(event.id!);
          onAck();
        } else {
          if (status !== 0) throw new Error(`delivery of ${event.id} answered ${status}`);
          queue.push(event);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }),
  );
}

const kinds = await databasesUnderTest('crash');

describe.each(kinds)('SIGKILL during a burst on $name', (kind) => {
  let db: TestDatabase;
  let sim: Simulator;
  let engine: EngineProcess | undefined;

  beforeAll(() => {
    if (!existsSync('dist/main.js')) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');
  });

  beforeEach(async () => {
    db = await kind.create();
    // A little latency keeps action runs in flight when the kill comes.
    sim = await startSimulator({ seed: true, latencyMs: 5 });
  }, SLOW);

  afterEach(async () => {
    await engine?.kill();
    await sim?.close();
    await db?.drop();
  }, SLOW);

  /**
   * Runs the burst, SIGKILLing the engine at each kill point and starting it
   * again on the same database right away, then checks the outcome.
   */
  async function burstWithKills(points: number[]): Promise<void> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = { DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([rule]), LOG_LEVEL: 'warn' };
    engine = await spawnEngine(env, port);
    const events = Array.from({ length: BURST }, () => aTaskEvent('task.completed'));
    const acknowledged = new Set<string>();
    const pending = [...points];
    const kills: number[] = [];
    let restarting: Promise<void> = Promise.resolve();
    let restartFailed: Error | undefined;

    const maybeKill = () => {
      if (pending.length === 0 || acknowledged.size < pending[0]) return;
      pending.shift();
      kills.push(acknowledged.size);
      const victim = engine!;
      restarting = restarting.then(async () => {
        await victim.kill('SIGKILL');
        engine = await spawnEngine(env, port);
      }).catch((error: Error) => {
        restartFailed = error;
      });
    };
    const check = () => {
      if (restartFailed) throw restartFailed;
    };
    try {
      await deliverAll(url, events, acknowledged, maybeKill, check);
      await restarting;
      check();
      expect(kills).toHaveLength(points.length);
      expect(acknowledged.size).toBe(BURST);

      const titles = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));
      await waitFor(() => new Set(titles()).size >= BURST, 60_000, `${BURST} follow-up tasks`);
      await waitFor(async () => (await allPages(engine!, '/admin/events?status=received', 500)).items.length === 0, 20_000, 'every event evaluated');

      const counts = new Map<string, number>();
      for (const title of titles()) counts.set(title, (counts.get(title) ?? 0) + 1);
      expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
      expect([...acknowledged].filter((id) => counts.get(`${PREFIX}${id}`) !== 1)).toEqual([]);
      const effects = [...sim.effectsByIdempotencyKey];
      expect(effects.filter(([, n]) => n !== 1)).toEqual([]);
      expect(effects).toHaveLength(BURST);
      expect((await allPages(engine!, '/admin/actions?status=failed', 500)).items).toEqual([]);
    } catch (error) {
      (error as Error).message += `\n(kill points ${points.join(', ')}; killed after ${kills.join(', ')} acknowledgements)`;
      throw error;
    }
  }

  it('loses no acknowledged event and repeats no effect after one kill', async () => {
    await burstWithKills(killPoints([[100, 140]]));
  }, 120_000);

  it('loses no acknowledged event and repeats no effect after three kills at random points', async () => {
    await burstWithKills(killPoints([[30, 80], [110, 170], [190, 260]]));
  }, 180_000);
});
