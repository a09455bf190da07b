/**
 * SIGKILL in the middle of a burst: the engine runs as a real child process on a
 * database file (or PostgreSQL), is killed while events are arriving and actions
 * are being sent, and is started again on the same database. Every event it
 * acknowledged must end with its action done exactly once at the service.
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { databasesUnderTest, type TestDatabase } from './support/databases.js';
import { rulesDir, spawnEngine, type EngineProcess } from './support/engine.js';
import { aTaskEvent, body, deliver, waitFor } from './support/events.js';

const BURST = 300;
const KILL_AFTER_ACKS = 120;

const rule = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review: {{ event.id }}' } }],
};

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
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
  });

  afterEach(async () => {
    await engine?.kill();
    await sim.close();
    await db.drop();
  });

  it('loses no acknowledged event and repeats no effect', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: db.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([rule]), LOG_LEVEL: 'warn' };
    engine = await spawnEngine(env, port);
    const events = Array.from({ length: BURST }, () => aTaskEvent('task.completed'));
    const acknowledged = new Set<string>();
    let killed: Promise<void> | undefined;

    let next = 0;
    const senders = Array.from({ length: 16 }, async () => {
      while (next < events.length) {
        const event = events[next++];
        try {
          const res = await deliver(`http://127.0.0.1:${port}`, event);
          if (res.status === 202 || res.status === 200) acknowledged.add(event.id!);
        } catch {
          // The engine is down: this delivery was not acknowledged, the service would send it again.
        }
        if (acknowledged.size >= KILL_AFTER_ACKS && !killed) killed = engine!.kill('SIGKILL');
      }
    });
    await Promise.all(senders);
    await killed;
    expect(acknowledged.size).toBeGreaterThanOrEqual(KILL_AFTER_ACKS);

    engine = await spawnEngine(env, port);
    // Deliveries that failed are sent again, as the service retries them.
    for (const event of events.filter((e) => !acknowledged.has(e.id!))) {
      const res = await deliver(`http://127.0.0.1:${port}`, event);
      expect([200, 202]).toContain(res.status);
      acknowledged.add(event.id!);
    }

    const titles = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith('Review: '));
    await waitFor(() => new Set(titles()).size >= BURST, 60_000, `${BURST} follow-up tasks`);
    const counts = new Map<string, number>();
    for (const title of titles()) counts.set(title, (counts.get(title) ?? 0) + 1);
    expect([...counts.values()].filter((n) => n > 1)).toEqual([]);
    for (const id of acknowledged) expect(counts.get(`Review: ${id}`)).toBe(1);
    for (const [key, effects] of sim.effectsByIdempotencyKey) expect([key, effects]).toEqual([key, 1]);
  }, 120_000);
});
