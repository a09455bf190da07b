/**
 * The file system under the engine's SQLite file fails during a run: the
 * kernel turns it read-only after an error, as it does after a real disk error
 * (ext4, errors=remount-ro; support/storage-faults.ts), and every write fails
 * with an I/O error. The engine refuses webhooks with 503 while it lasts. The
 * repair is an operator's: unmount, e2fsck, mount again; for e2fsck to run, the
 * engine must have let go of its file, and once the file is back it must open it
 * again, by itself. Nothing it acknowledged before the failure is lost, and each
 * acknowledged event acts once.
 *
 * SQLite only: PostgreSQL's side of a failing disk is the server's to handle;
 * the engine sees a server that is unreachable or refuses writes, which
 * storage-faults.e2e-spec.ts and storage-read-only.e2e-spec.ts cover.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { canMakeIoErrors, FailingDisk } from './support/storage-faults.js';
import { waitUntil } from './support/wait.js';

const PREFIX = 'Survived: ';
const HOOK_TIMEOUT = 60_000;
/** How late the service answers the first actions. */
const ANSWER_DELAY_MS = 2_000;
/** How long the engine tries to write an action's outcome while the database refuses writes (its lease less the service timeout). */
const OUTCOME_PATIENCE_MS = 5_000;

const rule = {
  id: 'survived',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } }],
};

const available = await canMakeIoErrors('storage: the file system fails under the engine');

(available ? describe : describe.skip)('an engine on SQLite whose file system fails during a run', () => {
  let disk: FailingDisk;
  let sim: Simulator;
  let engine: RunningEngine | undefined;

  beforeAll(async () => {
    disk = await FailingDisk.mount();
    sim = await startSimulator({ seed: true, latencyMs: 20 });
  }, HOOK_TIMEOUT);

  afterAll(async () => {
    await engine?.stop().catch(() => undefined);
    await sim?.close();
    await disk?.dispose();
  }, HOOK_TIMEOUT);

  const created = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));

  it('refuses with 503 while it has failed, opens its file again once it is repaired, and loses nothing it acknowledged', async () => {
    // Runs are leased for longer than the waits below (SERVICE_TIMEOUT_MS + 5 s). The service answers the first
    // actions late, so they are in flight when the disk fails, and the disk stays failed for longer than the engine
    // tries to write their outcomes: a run the fault cut short must be taken again once the file is back, not when its lease runs out.
    const env = { DATABASE_URL: disk.url, SERVICE_API_URL: sim.url, RULES_DIR: rulesDir([rule]), LOG_LEVEL: 'info', SERVICE_TIMEOUT_MS: '30000' };
    engine = await startEngine(env);
    sim.setFaults({ script: [{ delayMs: ANSWER_DELAY_MS, count: 40, method: 'POST', pathPrefix: '/tasks' }] });
    const acknowledged: TestEvent[] = [];
    for (let i = 0; i < 40; i++) {
      const event = aTaskEvent('task.completed');
      expect((await deliver(engine.url, event)).status).toBe(202);
      acknowledged.push(event);
    }

    disk.fail();
    const failedAt = Date.now();
    const refusals = await Promise.all(Array.from({ length: 5 }, () => deliver(engine!.url, aTaskEvent('task.completed'))));
    for (const answer of refusals) {
      const { error } = (await answer.json()) as { error: { code: string } };
      expect({ status: answer.status, retryAfter: answer.headers.get('retry-after'), code: error.code }).toEqual({
        status: 503,
        retryAfter: '5',
        code: 'storage_unavailable',
      });
    }
    const ready = await fetch(`${engine.url}/health/ready`);
    expect({ status: ready.status, body: await ready.json() }).toEqual({
      status: 503,
      body: { error: { code: 'storage_unavailable', message: expect.stringMatching(/refuses writes \((io_error|read_only)\)/) } },
    });

    // The fault's length is the scenario: the service's late answers arrive during it, and the engine's patience
    // with writing them (5 s, action-runner.ts) ends before the disk is repaired.
    await waitUntil(() => created().length > 0, { timeoutMs: 30_000, what: 'the first late answer' });
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, failedAt + ANSWER_DELAY_MS + OUTCOME_PATIENCE_MS + 1_000 - Date.now())));
    const fsckWaitedMs = await disk.repair(); // only possible once the engine let go of its file
    const repaired = Date.now();
    const next = aTaskEvent('task.completed');
    while ((await deliver(engine.url, next)).status !== 202) {
      expect(Date.now() - repaired).toBeLessThan(10_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const recoveryMs = Date.now() - repaired;
    expect(recoveryMs).toBeLessThan(5_000);
    acknowledged.push(next);

    const expected = acknowledged.map((e) => `${PREFIX}${e.id}`).sort();
    await waitUntil(() => new Set(created()).size >= expected.length, { timeoutMs: 30_000, what: `${expected.length} tasks` });
    await waitUntil(async () => (await allPages(engine!, '/admin/executions?status=running', 500)).items.length === 0, { timeoutMs: 30_000, what: 'every execution to end' });
    expect(created().sort()).toEqual(expected);
    expect([...sim.effectsByIdempotencyKey].filter(([, n]) => n !== 1)).toEqual([]);
    await waitUntil(async () => (await fetch(`${engine!.url}/health/ready`)).status === 200, { timeoutMs: 5_000, what: 'ready again' });

    const entries = engine.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.filter((e) => String(e.msg).startsWith('the database refuses writes')).length).toBe(1);
    expect(entries.filter((e) => e.msg === 'the database takes writes again').length).toBe(1);
    expect(entries.filter((e) => 'stack' in e || e.level === 'error')).toEqual([]);
    process.stdout.write(
      `\nstorage fault figures: ${JSON.stringify({ database: 'sqlite', fault: 'its file system fails (ext4 remounted read-only) and is repaired', acknowledged: expected.length, answersWhileFailed: refusals.map((a) => a.status), readyWhileFailed: ready.status, fsckWaitedMs, msFromRepairedToFirst202: recoveryMs })}\n`,
    );
  }, 120_000);
});

if (!available) {
  it('cannot make a file system fail here (see SKIPPED above)', () => undefined);
}
