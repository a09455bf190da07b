/**
 * Rule changes reach every replica at once on PostgreSQL (SPEC section 12:
 * within 1 second), through LISTEN/NOTIFY. Two engines in this process share one
 * fresh database; engine B's polling fallback is turned off, so only a
 * notification can tell B of a change made through engine A. Each check on B
 * ends with A stopped, so that the event sent afterwards is B's to evaluate.
 */
import { SchedulerRegistry } from '@nestjs/schedule';
import pg from 'pg';
import { Database } from '../src/database/database.service.js';
import { LISTENER_APPLICATION_NAME, notifyRulesChanged, RULES_CHANNEL } from '../src/database/notifications.js';
import { FOLLOW_REPLICAS_INTERVAL, RuleRegistry } from '../src/rules/rule-registry.service.js';
import { sendJson, settledEvent } from './support/admin.js';
import { cuttableProxy } from './support/cuttable-proxy.js';
import { databasesUnderTest, withPostgresClient } from './support/databases.js';
import { rulesDir, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig, type Rig } from './support/fixture.js';
import { taskRule, tasksTitled } from './support/rules-harness.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('rule change notifications');
const postgres = kinds.find((kind) => kind.name === 'postgres');
const onPostgres = postgres ? describe : describe.skip;

/** SPEC section 12. */
const WITHIN_MS = 1_000;

const watched = taskRule('watched', 'probe.replicas', 'Watched');

/** Two replicas on the rig's database and one rules folder; B hears of changes by notification only. */
async function twoReplicas(rig: Rig, rules: unknown[], envOfB: Record<string, string> = {}): Promise<{ a: RunningEngine; b: RunningEngine }> {
  const dir = rulesDir(rules);
  const a = await rig.start(dir);
  const b = await rig.start(dir, envOfB);
  // Throws when there is no such interval: the fallback really is off on B.
  b.app.get(SchedulerRegistry).deleteInterval(FOLLOW_REPLICAS_INTERVAL);
  return { a, b };
}

/** Milliseconds from now until `probe` holds, looked at every 10 ms. */
async function msUntil(probe: () => Promise<boolean>, what: string): Promise<number> {
  const started = performance.now();
  await waitUntil(probe, { timeoutMs: 10_000, intervalMs: 10, what });
  return Math.round(performance.now() - started);
}

const ruleOn = (engine: RunningEngine, id: string) => engine.admin(`/admin/rules/${id}`);

async function disabledOn(engine: RunningEngine, id: string): Promise<boolean> {
  return (await body(ruleOn(engine, id))).enabled === false;
}

/** Disables `id` through `a` and answers how long after `a`'s answer `b` showed it disabled. */
async function disableThrough(a: RunningEngine, b: RunningEngine, id: string): Promise<number> {
  const answer = await a.admin(`/admin/rules/${id}/disable`, { method: 'POST' });
  expect(answer.status).toBe(200);
  return msUntil(() => disabledOn(b, id), `rule ${id} disabled on engine B`);
}

/** The pids of the listeners' connections to the rig's database. */
function listeners(rig: Rig): Promise<number[]> {
  return withPostgresClient(rig.db.url, async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND query LIKE 'LISTEN%'`,
      [LISTENER_APPLICATION_NAME],
    );
    return rows.map((row) => row.pid).sort();
  });
}

onPostgres('rule changes across replicas on PostgreSQL', () => {
  const rig = useRig(postgres ?? kinds[0]);

  it('stops matching a rule on the other replica within a second of its disable through one', async () => {
    const { a, b } = await twoReplicas(rig, [watched]);
    await deliver(b.url, aTaskEvent('probe.replicas', { title: 'Before' }));
    await waitUntil(() => tasksTitled(rig.sim, 'Watched: Before').length === 1, { what: 'the rule to act while enabled' });

    const ms = await disableThrough(a, b, 'watched');
    expect(ms).toBeLessThan(WITHIN_MS);

    await a.stop();
    const after = aTaskEvent('probe.replicas', { title: 'After' });
    expect((await deliver(b.url, after)).status).toBe(202);
    const detail = await settledEvent(b, String(after.id));
    expect(detail.executions).toEqual([]);
    expect(detail.rules.filter((r: { rule: string }) => r.rule === 'watched')).toEqual([]);
    expect(tasksTitled(rig.sim, 'Watched: After')).toEqual([]);
  });

  it('matches an API rule on the other replica within a second of its creation through one', async () => {
    const { a, b } = await twoReplicas(rig, []);
    const created = await a.admin('/admin/rules', sendJson('POST', taskRule('made-on-a', 'probe.api-replicas', 'Made on A')));
    expect(created.status).toBe(201);
    const ms = await msUntil(async () => (await ruleOn(b, 'made-on-a')).status === 200, 'the API rule on engine B');
    expect(ms).toBeLessThan(WITHIN_MS);

    await a.stop();
    expect((await deliver(b.url, aTaskEvent('probe.api-replicas', { title: 'Seen by B' }))).status).toBe(202);
    await waitUntil(() => tasksTitled(rig.sim, 'Made on A: Seen by B').length === 1, { what: 'engine B to act on the API rule' });
  });

  it('listens again after its connection is killed, and a later change still arrives within a second', async () => {
    const { a, b } = await twoReplicas(rig, [watched]);
    const before = await listeners(rig);
    expect(before).toHaveLength(2); // one per replica

    await withPostgresClient(rig.db.url, (client) => client.query(`SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, [before]));
    const after = await waitUntil(
      async () => {
        const now = await listeners(rig);
        return now.length === 2 && now.every((pid) => !before.includes(pid)) && now;
      },
      { timeoutMs: 10_000, what: 'both replicas listening again on new connections' },
    );
    expect(after).toHaveLength(2);

    const ms = await disableThrough(a, b, 'watched');
    expect(ms).toBeLessThan(WITHIN_MS);
    // The outage was logged once by each replica, and its end once. (Nest's static loggers of
    // in-process engines write to the engine started last: the lines are counted over both logs.)
    const lines = (text: string) => [...a.logs, ...b.logs].filter((line) => line.includes(text)).length;
    expect(lines('rule change notifications: connection lost')).toBe(2);
    expect(lines('rule change notifications: listening again')).toBe(2);

    await a.stop();
    // A stopped replica's listener connection is closed with it.
    await waitUntil(async () => (await listeners(rig)).length === 1, { what: "engine A's listener connection to close at its stop" });
    const late = aTaskEvent('probe.replicas', { title: 'Late' });
    expect((await deliver(b.url, late)).status).toBe(202);
    expect((await settledEvent(b, String(late.id))).executions).toEqual([]);
  });

  it('reads the rules again when its listener is back, for the changes it could not hear meanwhile', async () => {
    const proxy = await cuttableProxy(rig.db.url);
    rig.defer(() => proxy.close());
    // B reaches PostgreSQL only through the proxy, its listener included.
    const { a, b } = await twoReplicas(rig, [watched], { DATABASE_URL: proxy.through(rig.db.url) });

    proxy.cut();
    await waitUntil(() => proxy.attemptsWhileDown.length > 0, { what: "engine B's listener trying to reconnect" });
    expect((await a.admin('/admin/rules/watched/disable', { method: 'POST' })).status).toBe(200);
    expect(b.app.get(RuleRegistry).get('watched')?.enabled).toBe(true); // its notification was lost to B

    proxy.restore();
    await waitUntil(() => disabledOn(b, 'watched'), { timeoutMs: 10_000, intervalMs: 50, what: 'rule watched disabled on engine B once it listens again' });
  });

  it('notifies when the change commits, and never for a change rolled back', async () => {
    const engine = await rig.start([]);
    const db = engine.app.get(Database);
    const heard: string[] = [];
    const listener = new pg.Client({ connectionString: rig.db.url });
    await listener.connect();
    rig.defer(() => listener.end());
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    await listener.query(`LISTEN ${RULES_CHANNEL}`);

    await expect(
      db.write(async (manager) => {
        await notifyRulesChanged(manager, 'rolled-back');
        throw new Error('the change fails after its notification');
      }),
    ).rejects.toThrow('the change fails');
    await db.write(async (manager) => {
      await notifyRulesChanged(manager, 'committed');
      // A round trip on the listening connection delivers whatever was sent by now: nothing before the commit.
      await listener.query('SELECT 1');
      expect(heard).toEqual([]);
    });
    await waitUntil(() => heard.length > 0, { what: 'the committed notification' });
    // Notifications arrive in commit order: one from the rolled-back write would have come first.
    expect(heard).toEqual(['committed']);
  });
});
