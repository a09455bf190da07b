/**
 * SIGKILL in the middle of a burst: the engine runs as a real child process on a
 * database file (or PostgreSQL), is killed while events are arriving and actions
 * are being sent, and is started again on the same database, as often as the
 * test says. Every event it acknowledged must end with its action done exactly
 * once at the service. Deliveries that found the engine down are sent again, as
 * the service retries webhooks that got no answer.
 */
import { allPages, quietEngine } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { rulesDir, type EngineProcess } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

const BURST = 300;
const SENDERS = 16;
const PREFIX = 'Review: ';

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
 * with `SENDERS` concurrent senders. A delivery that fails (the engine is down)
 * goes back in the queue, and its sender waits for `engineUp` (the engine
 * started again; it throws to give up, when it could not be) before it sends
 * again, as the service retries a webhook that got no answer later. Calls
 * `onAck` after each acknowledgement.
 */
async function deliverAll(url: string, events: TestEvent[], acknowledged: Set<string>, onAck: () => void, engineUp: () => Promise<void>): Promise<void> {
  const queue = [...events];
  let inFlight = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      for (;;) {
        const event = queue.shift();
        if (!event) {
          if (inFlight === 0) return;
          // Another sender's delivery may still fail and come back.
          await waitUntil(() => queue.length > 0 || inFlight === 0, {
            timeoutMs: 60_000,
            intervalMs: 20,
            what: `the other senders to be acknowledged or to put their event back (${inFlight} in flight)`,
          });
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
          await engineUp();
        }
      }
    }),
  );
}

const kinds = await databasesUnderTest('crash');

describe.each(kinds)('SIGKILL during a burst on $name', (kind) => {
  // A little latency keeps action runs in flight when the kill comes.
  const rig = useRig(kind, { simulator: { latencyMs: 5 } });

  /**
   * Runs the burst, SIGKILLing the engine at each kill point and starting it
   * again on the same database right away, then checks the outcome.
   */
  async function burstWithKills(points: number[]): Promise<void> {
    const sim = rig.sim;
    const rules = rulesDir([rule]);
    const env = { LOG_LEVEL: 'warn' };
    let engine: EngineProcess = await rig.spawn(rules, env);
    const { url, port } = engine;
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
      const victim = engine;
      restarting = restarting.then(async () => {
        await victim.kill('SIGKILL');
        engine = await rig.spawn(rules, env, port);
      }).catch((error: Error) => {
        restartFailed = error;
      });
    };
    const engineUp = async () => {
      await restarting;
      if (restartFailed) throw restartFailed;
    };
    try {
      await deliverAll(url, events, acknowledged, maybeKill, engineUp);
      await engineUp();
      expect(kills).toHaveLength(points.length);
      expect(acknowledged.size).toBe(BURST);

      const titles = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));
      await waitUntil(() => new Set(titles()).size >= BURST, { timeoutMs: 60_000, what: `${BURST} follow-up tasks` });
      // Nothing left to evaluate, run or retry: the counts below are final.
      await quietEngine(engine, 30_000);

      const counts = new Map<string, number>();
      for (const title of titles()) counts.set(title, (counts.get(title) ?? 0) + 1);
      expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
      expect([...acknowledged].filter((id) => counts.get(`${PREFIX}${id}`) !== 1)).toEqual([]);
      const effects = [...sim.effectsByIdempotencyKey];
      expect(effects.filter(([, n]) => n !== 1)).toEqual([]);
      expect(effects).toHaveLength(BURST);
      expect((await allPages(engine, '/admin/actions?status=failed', 500)).items).toEqual([]);
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
