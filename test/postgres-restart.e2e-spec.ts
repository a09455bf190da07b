/**
 * PostgreSQL restarts under a running engine in the middle of a burst of
 * webhooks (issue 9): the server is stopped, stays down a few hundred
 * milliseconds (new connections refused), and starts again on the same port;
 * once cleanly (`pg_ctl stop -m fast`: every session is terminated "due to
 * administrator command"), once as abruptly as a crash (`-m immediate`, then
 * crash recovery at start). The server is a private one (support/private-postgres.ts), so the
 * restart disturbs no other suite. Nothing restarts the engine.
 *
 * While the server is down, webhooks are refused with a clear 503 (nothing
 * acknowledged that was not stored) and /health/ready answers 503; afterwards,
 * every acknowledged event acts exactly once, every action reaches the service
 * once per Idempotency-Key, and /health/ready answers 200 again.
 *
 * The senders send a refused webhook again, the same event, until it is
 * acknowledged, as the service does. A webhook whose commit reached the server
 * just before it went away, and whose answer did not, was refused with 503 and
 * yet stored; sent again it is answered 200 (duplicate), and it acts once like
 * the others (seen in CI, in the abrupt restart: two such events in a burst).
 *
 * The run's figures are printed (`postgres restart figures:`), for the record.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { LISTENER_APPLICATION_NAME } from '../src/database/notifications.js';
import { withPostgresClient } from './support/databases.js';
import { PrivatePostgres } from './support/private-postgres.js';
import { waitUntil } from './support/wait.js';

const SENDERS = 8;
const PREFIX = 'Restart-proof: ';
/** Acknowledgements before the server is stopped, and after it is back before the burst ends. */
const ACKS_BEFORE = 150;
const ACKS_AFTER = 150;
/** How long the server stays down, at least (and until the engine was seen refusing). */
const DOWN_MS = 400;
const HOOK_TIMEOUT = 60_000;

const rule = {
  id: 'restart-proof',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } }],
};

type Phase = 'before' | 'down' | 'after';

/** A webhook is acknowledged by 202 (new) or 200 (duplicate: stored before, by a delivery that was refused). */
const ACKNOWLEDGED = new Set([200, 202]);

interface Answer {
  phase: Phase;
  status: number;
  retryAfter: string | null;
  code?: string;
  message?: string;
}

/**
 * The burst: senders deliver until told to stop; what each answer was, and in which phase of the restart. A refused
 * event is sent again until it is acknowledged, so a sender stops once its last event was.
 */
class Burst {
  phase: Phase = 'before';
  readonly acknowledged: TestEvent[] = [];
  /** Events refused, then answered 200 (duplicate) when sent again: stored although their first answer was 503. */
  readonly storedDespiteRefusal: TestEvent[] = [];
  readonly answers: Answer[] = [];
  ackedAfterRestart = 0;
  private stopping = false;
  private senders: Promise<void>[] = [];

  constructor(private readonly engineUrl: string) {}

  start(): void {
    this.senders = Array.from({ length: SENDERS }, () => this.send());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.senders);
  }

  refusedWhile(phase: Phase): Answer[] {
    return this.answers.filter((a) => a.phase === phase && !ACKNOWLEDGED.has(a.status));
  }

  private async send(): Promise<void> {
    let event: TestEvent | undefined;
    let refused = false;
    while (!this.stopping || event !== undefined) {
      if (event === undefined) [event, refused] = [aTaskEvent('task.completed'), false];
      const phase = this.phase;
      const response = await deliver(this.engineUrl, event);
      const answer: Answer = { phase, status: response.status, retryAfter: response.headers.get('retry-after') };
      if (ACKNOWLEDGED.has(response.status)) {
        this.acknowledged.push(event);
        if (response.status === 200 && refused) this.storedDespiteRefusal.push(event);
        if (phase === 'after') this.ackedAfterRestart++;
        event = undefined;
      } else {
        refused = true;
        const { error } = (await response.json().catch(() => ({}))) as { error?: { code: string; message: string } };
        Object.assign(answer, { code: error?.code, message: error?.message });
        // Refused while the server is coming back: the sender waits a little, as Retry-After asks (shortened here).
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      this.answers.push(answer);
    }
  }
}

function countBy(values: Array<string | number>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

function logEntries(engine: RunningEngine): Array<Record<string, unknown>> {
  return engine.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
}

const runnable = PrivatePostgres.canRun('postgres restart');
let server: PrivatePostgres | undefined;

beforeAll(async () => {
  if (runnable) server = await PrivatePostgres.create();
}, HOOK_TIMEOUT);

const restarts = [
  { mode: 'fast' as const, how: 'cleanly (every session terminated by the administrator)' },
  { mode: 'immediate' as const, how: 'as abruptly as a crash (recovery at start)' },
];

/** Sessions of the engine's rule-change listener on the server: its connection of its own, outside the pool. */
async function listenerSessions(databaseUrl: string): Promise<number> {
  const rows = await withPostgresClient(databaseUrl, (c) => c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [LISTENER_APPLICATION_NAME]));
  return (rows.rows[0] as { n: number }).n;
}

afterAll(() => server?.remove(), HOOK_TIMEOUT);

(runnable ? describe.each(restarts) : describe.skip.each(restarts))('an engine on PostgreSQL whose server restarts $how during a burst', ({ mode }) => {
  let sim: Simulator;
  let engine: RunningEngine | undefined;

  beforeEach(async () => {
    // A little latency at the service, so that action runs are in flight when the server goes away.
    sim = await startSimulator({ seed: true, rateLimitPerMinute: 1_000_000, latencyMs: 20 });
  }, HOOK_TIMEOUT);

  afterEach(async () => {
    await engine?.stop().catch(() => undefined);
    engine = undefined;
    await sim?.close();
  }, HOOK_TIMEOUT);

  const created = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));
  const ready = async () => (await fetch(`${engine!.url}/health/ready`)).status;

  it('refuses clearly while it is down, and afterwards acts on every acknowledged event exactly once, without a restart of the engine', async () => {
    const pg = server!;
    const databaseUrl = await pg.createDatabase();
    engine = await startEngine({
      DATABASE_URL: databaseUrl,
      SERVICE_API_URL: sim.url,
      RULES_DIR: rulesDir([rule]),
      SERVICE_RATE_LIMIT_PER_MINUTE: '60000',
      LOG_LEVEL: 'info',
    });
    const app = engine.app;
    await waitUntil(async () => (await listenerSessions(databaseUrl)) === 1, { what: 'the rule-change listener to connect' });
    const burst = new Burst(engine.url);
    burst.start();

    // 1. The burst runs; then the server stops under it.
    await waitUntil(() => burst.acknowledged.length >= ACKS_BEFORE, { timeoutMs: 30_000, what: `${ACKS_BEFORE} acknowledgements` });
    const stoppingAt = Date.now();
    await pg.stop(mode);
    const downAt = Date.now();
    burst.phase = 'down';

    // 2. While it is down: ready answers 503, webhooks are refused, the process answers /health.
    const readyWhileDown = await waitUntil(
      async () => {
        const answer = await fetch(`${engine!.url}/health/ready`);
        return answer.status === 503 && `${answer.status} ${((await answer.json()) as { error: { code: string } }).error.code}`;
      },
      { timeoutMs: 5_000, what: '/health/ready to answer 503' },
    );
    await waitUntil(() => burst.refusedWhile('down').length >= SENDERS, { timeoutMs: 5_000, what: 'webhooks to be refused while the server is down' });
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, DOWN_MS - (Date.now() - downAt))));

    // 3. The server is back; the burst goes on until enough was acknowledged after it.
    await pg.start();
    const upAt = Date.now();
    const downMs = upAt - downAt;
    burst.phase = 'after';
    await waitUntil(async () => (await ready()) === 200, { timeoutMs: 10_000, what: '/health/ready to answer 200 again' });
    const readyAfterMs = Date.now() - upAt;
    await waitUntil(() => burst.ackedAfterRestart >= ACKS_AFTER, { timeoutMs: 30_000, what: `${ACKS_AFTER} acknowledgements after the restart` });
    await burst.stop();

    // 4. Every refusal was a clear 503 that asks to send again later; never a 500, never a dropped connection.
    const refusals = burst.answers.filter((a) => !ACKNOWLEDGED.has(a.status));
    expect(refusals.filter((a) => a.status !== 503 || a.retryAfter === null || !/later/.test(a.message ?? ''))).toEqual([]);
    expect(burst.refusedWhile('down').length).toBeGreaterThan(0);

    // 5. Every acknowledged event acts exactly once; every action reached the service once (one request per Idempotency-Key).
    const expected = burst.acknowledged.map((e) => `${PREFIX}${e.id}`).sort();
    await waitUntil(() => new Set(created()).size >= expected.length, { timeoutMs: 60_000, what: `${expected.length} tasks` });
    await waitUntil(async () => (await allPages(engine!, '/admin/executions?status=running', 500)).items.length === 0, {
      timeoutMs: 30_000,
      what: 'every execution to end',
    });
    const allActedMs = Date.now() - upAt;
    expect(created().sort()).toEqual(expected);
    expect([...sim.effectsByIdempotencyKey].filter(([, n]) => n !== 1)).toEqual([]);
    const sends = countBy(sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks').map((r) => r.idempotencyKey ?? 'none'));
    expect((await allPages(engine, '/admin/actions?status=failed', 500)).items).toEqual([]);
    expect(await ready()).toBe(200);

    // 6. The rule-change listener is back on its own connection; no error logged, no stack trace; the same engine throughout.
    await waitUntil(async () => (await listenerSessions(databaseUrl)) === 1, { what: 'the rule-change listener to connect again' });
    const entries = logEntries(engine);
    expect(entries.filter((e) => 'stack' in e || e.level === 'error')).toEqual([]);
    expect(engine.app).toBe(app);

    process.stdout.write(
      `\npostgres restart figures: ${JSON.stringify({
        mode,
        msToStop: downAt - stoppingAt,
        msDown: downMs,
        readyWhileDown,
        answersBySentPhase: Object.fromEntries((['before', 'down', 'after'] as const).map((p) => [p, countBy(burst.answers.filter((a) => a.phase === p).map((a) => a.status))])),
        refusalCodes: countBy(refusals.map((a) => a.code ?? 'none')),
        msFromStartToReady: readyAfterMs,
        msFromStartToAllActed: allActedMs,
        acknowledged: expected.length,
        storedDespiteRefusal: burst.storedDespiteRefusal.length,
        actedExactlyOnce: created().length === expected.length,
        requestsPerIdempotencyKey: countBy(Object.values(sends)),
        log: entries.filter((e) => e.level !== 'info' || /database/.test(String(e.msg))).map((e) => e.msg),
      })}\n`,
    );
    expect(Object.entries(sends).filter(([, n]) => n !== 1)).toEqual([]);
  }, 180_000);
});
