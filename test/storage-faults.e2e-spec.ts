/**
 * The database stops taking writes under a running engine, and then takes them
 * again. On SQLite the engine's file sits on a small tmpfs that a burst of
 * events (2 KB bodies) fills, and the tmpfs is then grown; on PostgreSQL the
 * server refuses writes to the engine's database mid-burst, and then takes them
 * again (support/storage-faults.ts). Nothing restarts the engine. While writes
 * fail, webhooks are refused with 503 storage_unavailable and a Retry-After,
 * /health/ready answers 503 with the reason, the failures are counted, and the
 * log says so once; once writes go through again, events are acknowledged
 * within seconds, and every acknowledged event acts exactly once.
 *
 * The run's figures are printed (`storage fault figures:`), for the record.
 */
import { startSimulator, type Simulator } from '../src/simulator/simulator.js';
import { allPages } from './support/admin.js';
import { answerProblems, type OpenApiDocument } from './support/openapi-answers.js';
import { databasesUnderTest, type DatabaseKindUnderTest } from './support/databases.js';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { canMakeDiskFaults, refuseWrites, SmallDisk, takeWrites } from './support/storage-faults.js';
import { waitUntil } from './support/wait.js';

const SENDERS = 8;
const PREFIX = 'Stored once: ';
/** The run stops filling once this many deliveries in a row were refused. */
const REFUSED_IN_A_ROW = 25;
/** Bounds the burst should the disk never fill. */
const MAX_EVENTS = 6_000;
/** On PostgreSQL, the server starts refusing writes after this many acknowledgements. */
const ACKS_BEFORE_REFUSING = 150;
const HOOK_TIMEOUT = 60_000;

const rule = {
  id: 'stored-once',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } }],
};

/** A webhook body of about 2 KB, as in the report this suite answers. */
function aLargeEvent(): TestEvent {
  return aTaskEvent('task.completed', { description: 'd'.repeat(2_000) });
}

/** How the database stops and starts taking writes, per kind. */
interface Fault {
  databaseUrl: string;
  /** After `acks` acknowledgements: start refusing, where the test makes it so. */
  maybeStart(acks: number): Promise<void>;
  /** Writes go through again. */
  end(): Promise<void>;
  dispose(): Promise<void>;
}

async function sqliteFault(): Promise<Fault> {
  // As in the report this suite answers: 12 MB, then 200 MB.
  const disk = await SmallDisk.mount('12m');
  return { databaseUrl: disk.url, maybeStart: async () => undefined, end: () => disk.resize('200m').then(() => undefined), dispose: () => disk.unmount() };
}

async function postgresFault(kind: DatabaseKindUnderTest): Promise<Fault> {
  const db = await kind.create();
  let started = false;
  return {
    databaseUrl: db.url,
    async maybeStart(acks) {
      if (started || acks < ACKS_BEFORE_REFUSING) return;
      started = true;
      await refuseWrites(db.url);
    },
    end: () => takeWrites(db.url),
    dispose: async () => {
      await takeWrites(db.url).catch(() => undefined);
      await db.drop();
    },
  };
}

interface Burst {
  acknowledged: TestEvent[];
  statuses: number[];
}

/** Delivers events with SENDERS senders until REFUSED_IN_A_ROW deliveries in a row were refused (or MAX_EVENTS). */
/** At most this many single events after the burst (each takes a few pages). */
const MAX_TOP_UP = 200;

async function fillUntilRefused(engine: RunningEngine, fault: Fault): Promise<Burst> {
  const burst: Burst = { acknowledged: [], statuses: [] };
  let refusedInARow = 0;
  let sent = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (refusedInARow < REFUSED_IN_A_ROW && sent++ < MAX_EVENTS) {
        const event = aLargeEvent();
        const status = (await deliver(engine.url, event)).status;
        burst.statuses.push(status);
        if (status === 202) {
          burst.acknowledged.push(event);
          refusedInARow = 0;
          await fault.maybeStart(burst.acknowledged.length);
        } else refusedInARow++;
      }
    }),
  );
  // Deliveries that arrive together share one commit, so a refused batch can leave room for one event more:
  // fill that too, one event at a time, so that "full" means full for a single event as well.
  await oneAtATimeUntilRefused(burst, async (event) => {
    const answer = await deliver(engine.url, event);
    burst.statuses.push(answer.status);
    return answer;
  });
  return burst;
}

/** Sends one event at a time until one is refused (at most MAX_TOP_UP): those taken join `burst.acknowledged`; the last answer. */
async function oneAtATimeUntilRefused(burst: Burst, send: (event: TestEvent) => Promise<Response>): Promise<Response> {
  let answer: Response | undefined;
  for (let topUp = 0; topUp < MAX_TOP_UP; topUp++) {
    const event = aLargeEvent();
    answer = await send(event);
    if (!answer.ok) break;
    burst.acknowledged.push(event);
  }
  return answer!;
}

function countBy(values: number[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** engine_queue_depth from a scrape: work not finished yet. */
function queueDepths(metrics: string): Record<string, number> {
  return Object.fromEntries([...metrics.matchAll(/^engine_queue_depth\{queue="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]));
}

/** The engine's log, parsed. */
function logEntries(engine: RunningEngine): Array<Record<string, unknown>> {
  return engine.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
}

const kinds = await databasesUnderTest('storage faults');
const diskFaults = await canMakeDiskFaults('storage faults: a full disk');
const runnable = kinds.filter((kind) => kind.name === 'postgres' || diskFaults);
const faultOn: Record<DatabaseKindUnderTest['name'], string> = {
  sqlite: 'the disk of its SQLite file fills up and is grown again',
  postgres: 'PostgreSQL refuses writes and then takes them again',
};

describe.each(runnable)('an engine on $name whose database stops taking writes', (kind) => {
  let fault: Fault;
  let sim: Simulator;
  let engine: RunningEngine | undefined;

  beforeAll(async () => {
    fault = kind.name === 'sqlite' ? await sqliteFault() : await postgresFault(kind);
    // A little latency at the service, so that work is still waiting when the database stops taking writes.
    sim = await startSimulator({ seed: true, rateLimitPerMinute: 1_000_000, latencyMs: 20 });
  }, HOOK_TIMEOUT);

  afterAll(async () => {
    // Whatever happened above: the engine lets go of its file, then the disk is unmounted.
    await engine?.stop().catch(() => undefined);
    await sim?.close();
    await fault?.dispose();
  }, HOOK_TIMEOUT);

  const created = () => [...sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));

  it(`refuses clearly, reports it, and recovers by itself when ${faultOn[kind.name]}`, async () => {
    engine = await startEngine({
      DATABASE_URL: fault.databaseUrl,
      SERVICE_API_URL: sim.url,
      RULES_DIR: rulesDir([rule]),
      SERVICE_RATE_LIMIT_PER_MINUTE: '60000',
      LOG_LEVEL: 'info',
    });
    const app = engine.app;

    // 1. Fill: every answer is an acknowledgement or a clear refusal, never a 500.
    const burst = await fillUntilRefused(engine, fault);
    const errorsLogged = () => logEntries(engine!).filter((e) => e.level === 'error');
    expect({ answers: Object.keys(countBy(burst.statuses)).sort(), errorsLogged: errorsLogged() }).toEqual({ answers: ['202', '503'], errorsLogged: [] });
    expect(burst.acknowledged.length).toBeGreaterThan(0);

    // 2. While writes fail: refusals with the error shape and Retry-After; ready 503 with the reason; counted; alive.
    const waitingAtFault = queueDepths(await (await fetch(`${engine.url}/metrics`)).text());
    await waitUntil(async () => (await fetch(`${engine!.url}/health/ready`)).status === 503, { timeoutMs: 5_000, what: 'ready to answer 503' });
    const whileFull = await Promise.all(Array.from({ length: 10 }, () => deliver(engine!.url, aLargeEvent())));
    for (const answer of whileFull) {
      expect({ status: answer.status, retryAfter: answer.headers.get('retry-after'), body: await answer.json() }).toEqual({
        status: 503,
        retryAfter: '5',
        body: { error: { code: 'storage_unavailable', message: expect.stringContaining('nothing was stored') } },
      });
    }
    // An admin write is refused the same way (an injected event here). The database may have found room for one
    // more since (SQLite reuses its write-ahead log's space once a checkpoint has copied it out): an event it took is
    // acknowledged like any other, and must act once; the next is tried, until one is refused.
    const injected = await oneAtATimeUntilRefused(burst, (event) => engine!.admin('/admin/events', { method: 'POST', body: JSON.stringify(event) }));
    const injectedBody = (await injected.json()) as { error: { code: string } };
    const document = (await (await fetch(`${engine.url}/docs-json`)).json()) as OpenApiDocument;
    expect({
      status: injected.status,
      retryAfter: injected.headers.get('retry-after'),
      code: injectedBody.error.code,
      undeclared: answerProblems(document, 'POST', '/admin/events', injected.status, injectedBody),
    }).toEqual({ status: 503, retryAfter: '5', code: 'storage_unavailable', undeclared: [] });
    const ready = await fetch(`${engine.url}/health/ready`);
    const readyWhileFull = { status: ready.status, body: (await ready.json()) as { error: { code: string; message: string } } };
    expect(readyWhileFull).toEqual({ status: 503, body: { error: { code: 'storage_unavailable', message: expect.stringMatching(/refuses writes \(\w+\) since/) } } });
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    const metrics = await (await fetch(`${engine.url}/metrics`)).text();
    expect(metrics).toMatch(/^engine_storage_failures_total\{kind="(disk_full|read_only|unreachable)"\} [1-9]/m);

    // 3. Writes go through again: the same webhook, delivered again until it is acknowledged, timed from that moment.
    await fault.end();
    const writable = Date.now();
    const first = aLargeEvent();
    let refusedWhileRecovering = 0;
    while ((await deliver(engine.url, first)).status !== 202) {
      refusedWhileRecovering++;
      expect(Date.now() - writable).toBeLessThan(10_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const recoveryMs = Date.now() - writable;
    expect(recoveryMs).toBeLessThan(5_000);
    burst.acknowledged.push(first);
    await waitUntil(async () => (await fetch(`${engine!.url}/health/ready`)).status === 200, { timeoutMs: 5_000, what: 'ready to answer 200 again' });

    // 4. Every acknowledged event acts exactly once, those from before the fault included; refused ones never.
    const expected = burst.acknowledged.map((e) => `${PREFIX}${e.id}`).sort();
    await waitUntil(() => new Set(created()).size >= expected.length, { timeoutMs: 60_000, what: `${expected.length} tasks` });
    await waitUntil(async () => (await allPages(engine!, '/admin/executions?status=running', 500)).items.length === 0, {
      timeoutMs: 30_000,
      what: 'every execution to end',
    });
    expect(created().sort()).toEqual(expected);
    expect([...sim.effectsByIdempotencyKey].filter(([, n]) => n !== 1)).toEqual([]);
    expect((await allPages(engine, '/admin/actions?status=failed', 500)).items).toEqual([]);

    // 5. Said once when it started and once when it ended, with the count of refused requests; no stack traces.
    const entries = logEntries(engine);
    const started = entries.filter((e) => String(e.msg).startsWith('the database refuses writes'));
    const ended = entries.filter((e) => e.msg === 'the database takes writes again');
    const refusals = burst.statuses.filter((s) => s === 503).length + whileFull.length + 1 + refusedWhileRecovering;
    expect(started.length === 1 && ended.length === 1 ? 'once each' : [...started, ...ended]).toBe('once each');
    expect(ended[0].refusedRequests).toBe(refusals);
    expect(entries.filter((e) => 'stack' in e || e.level === 'error')).toEqual([]);
    expect(engine.app).toBe(app); // the same engine throughout: nothing restarted it

    process.stdout.write(
      `\nstorage fault figures: ${JSON.stringify({
        database: kind.name,
        fault: faultOn[kind.name],
        answersWhileFilling: countBy(burst.statuses),
        answersWhileFull: countBy(whileFull.map((a) => a.status)),
        readyWhileFull: `${readyWhileFull.status} ${readyWhileFull.body.error.code}: ${readyWhileFull.body.error.message}`,
        msFromWritableToFirst202: recoveryMs,
        refusedWhileRecovering,
        acknowledged: expected.length,
        waitingAtFault,
        actedExactlyOnce: created().length === expected.length && new Set(created()).size === expected.length,
        refusedRequestsLogged: ended[0].refusedRequests,
        outageLoggedSeconds: ended[0].seconds,
      })}\n`,
    );
  }, 180_000);
});

if (runnable.length === 0) {
  it('has no database to fail on here (see SKIPPED above)', () => undefined);
}
