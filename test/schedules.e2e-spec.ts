/**
 * Cron rules end to end (SPEC section 6): every tick becomes one `schedule.fired`
 * event with the id `schedule:<rule id>:<scheduled_for>`, acted on once, through a
 * restart and with two engine processes sharing one PostgreSQL database; rules
 * added, removed, disabled and enabled at run time start and stop their ticks.
 * The rules tick every 2 seconds (a six-field expression), so each test sees a
 * few real ticks. That a rule stays silent is seen against a witness: a rule
 * on the same schedule that stays enabled, so its ticks show the scheduler ran.
 */
import { allPages, notYet } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { rulesDir, type RunningEngine } from './support/engine.js';
import { body } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

const TICK_MS = 2000;

function everyTwoSeconds(id = 'tick') {
  return {
    id,
    name: 'Every two seconds',
    schedule: { cron: '*/2 * * * * *' },
    actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `${id} {{ event.data.scheduled_for }}` } }],
  };
}

type Admin = Pick<RunningEngine, 'admin'>;

interface Fired {
  id: string;
  status: string;
  receivedAt: string;
  scheduledFor: string;
  rule: string;
}

/** The schedule.fired events stored, oldest first, with the tick read from the id. */
async function firedEvents(engine: Admin, rule?: string): Promise<Fired[]> {
  const { items } = await allPages(engine, '/admin/events?type=schedule.fired', 500);
  return items
    .reverse()
    .map((e) => {
      const [, ruleId, ...rest] = String(e.id).split(':');
      return { id: e.id, status: e.status, receivedAt: e.received_at, scheduledFor: rest.join(':'), rule: ruleId };
    })
    .filter((e) => rule === undefined || e.rule === rule);
}

/** Log entries `schedule fired` (debug level) from JSON log lines. */
function fireLogs(lines: string[]): Array<{ rule: string; scheduled_for: string; outcome: string; time: string }> {
  return lines
    .join('')
    .split('\n')
    .filter((l) => l.includes('"schedule fired"'))
    .map((l) => JSON.parse(l));
}

const isTick = (iso: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/.test(iso) && new Date(iso).getUTCSeconds() % 2 === 0;

/**
 * Waits until the witness has fired at two ticks after `since` (its ticks as
 * `witnessTicks` reads them). A rule on the same schedule that wrongly fired
 * at the first of them has stored its event long before the second, so the
 * test can then look for such events and know it would see them.
 */
async function twoTicksAfter(since: string, witnessTicks: () => Promise<string[]> | string[]): Promise<void> {
  await waitUntil(
    async () => {
      const ticks = (await witnessTicks()).filter((tick) => tick > since);
      return ticks.length >= 2 || notYet(`the witness fired at ${ticks.length === 0 ? 'no tick' : ticks.join(', ')} since`);
    },
    { timeoutMs: 3 * TICK_MS + 2_000, what: `two ticks of the witness rule after ${since}` },
  );
}

const kinds = await databasesUnderTest('schedules');

describe.each(kinds)('cron rules on $name', (kind) => {
  const rig = useRig(kind);

  const start = (rulesFolder: string): Promise<RunningEngine> => rig.start(rulesFolder, { LOG_LEVEL: 'debug' });

  const tickTasks = (rule = 'tick') =>
    rig.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && String((r.body as { title?: string }).title).startsWith(`${rule} `));

  /**
   * Waits until every stored tick of `rule` is evaluated and each that matched
   * the rule has created its task. A tick is matched against the rules as they
   * are when it is evaluated (README, Known limits): the last tick fired before
   * the rule was turned off (disabled or deleted at one of `turnedOff`) may be
   * evaluated after and then be `ignored`. No other tick may go unacted on.
   */
  async function settled(engine: Admin, rule = 'tick', turnedOff: string[] = []): Promise<Fired[]> {
    const fired = await waitUntil(
      async () => {
        const fired = await firedEvents(engine, rule);
        const evaluated = fired.filter((e) => e.status !== 'received');
        const matched = fired.filter((e) => e.status === 'processed');
        const done = evaluated.length === fired.length && tickTasks(rule).length >= matched.length;
        return done ? fired : notYet(`${evaluated.length} of ${fired.length} tick(s) evaluated, ${tickTasks(rule).length} task(s) for ${matched.length} matched`);
      },
      { timeoutMs: 15_000, what: `the ticks of ${rule} to be acted on` },
    );
    const lastBefore = (time: string) => fired.filter((e) => e.scheduledFor <= time).at(-1)?.id;
    const mayBeMissed = new Set(turnedOff.map(lastBefore));
    for (const e of fired.filter((e) => e.status !== 'processed')) {
      expect({ id: e.id, status: e.status, lastBeforeTurnedOff: mayBeMissed.has(e.id) }).toEqual({ id: e.id, status: 'ignored', lastBeforeTurnedOff: true });
    }
    return fired;
  }

  /** Each tick fired once, at its time; each that matched acted once. */
  function expectOnePerTick(fired: Fired[], rule = 'tick') {
    const ticks = fired.map((e) => e.scheduledFor);
    expect(new Set(ticks).size).toBe(ticks.length);
    for (const e of fired) {
      expect(e.id).toBe(`schedule:${rule}:${e.scheduledFor}`);
      expect(isTick(e.scheduledFor)).toBe(true);
      // Fired at its tick, not caught up later.
      const lag = Date.parse(e.receivedAt) - Date.parse(e.scheduledFor);
      expect(lag).toBeGreaterThanOrEqual(0);
      expect(lag).toBeLessThan(1000);
    }
    const matched = fired.filter((e) => e.status === 'processed').map((e) => `${rule} ${e.scheduledFor}`);
    const titles = tickTasks(rule).map((r) => (r.body as { title: string }).title);
    expect(titles.sort()).toEqual(matched.sort());
  }

  it('fires once per tick, named by the tick, and acts once for each', async () => {
    const engine = await start(rulesDir([everyTwoSeconds()]));
    await waitUntil(async () => (await firedEvents(engine)).length >= 3, { timeoutMs: 10_000, what: 'three ticks' });
    // The ticks so far are all acted on while the rule is enabled.
    await settled(engine);
    const disabled = await engine.admin('/admin/rules/tick/disable', { method: 'POST' });
    expect(disabled.status).toBe(200);
    const fired = await settled(engine, 'tick', [new Date().toISOString()]);

    expectOnePerTick(fired);
    // No tick was skipped while the rule was enabled.
    const times = fired.map((e) => Date.parse(e.scheduledFor));
    expect(times.slice(1).map((t, i) => t - times[i])).toEqual(times.slice(1).map(() => TICK_MS));

    const detail = await body(engine.admin(`/admin/events/${encodeURIComponent(fired[0].id)}`));
    expect(detail.payload).toMatchObject({ id: fired[0].id, type: 'schedule.fired', data: { rule_id: 'tick', scheduled_for: fired[0].scheduledFor } });
    expect(detail.executions).toEqual([expect.objectContaining({ rule: 'tick', status: 'succeeded' })]);
  });

  it('stops firing a disabled rule and starts again when it is enabled', async () => {
    const engine = await start(rulesDir([everyTwoSeconds(), everyTwoSeconds('witness')]));
    await waitUntil(async () => (await firedEvents(engine, 'tick')).length >= 1, { what: 'a first tick' });
    await settled(engine);
    expect((await engine.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    const disabledAt = new Date().toISOString();
    await twoTicksAfter(disabledAt, async () => (await firedEvents(engine, 'witness')).map((e) => e.scheduledFor));
    const whileDisabled = await firedEvents(engine, 'tick');
    expect(whileDisabled.filter((e) => e.scheduledFor > disabledAt)).toEqual([]);

    expect((await engine.admin('/admin/rules/tick/enable', { method: 'POST' })).status).toBe(200);
    const enabledAt = new Date().toISOString();
    await waitUntil(async () => (await firedEvents(engine, 'tick')).some((e) => e.scheduledFor > enabledAt), { what: 'a tick after enabling' });
    await settled(engine, 'tick', [disabledAt]);
    expect((await engine.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    expectOnePerTick(await settled(engine, 'tick', [disabledAt, new Date().toISOString()]));
  });

  it('starts firing a rule created through the admin API and stops when it is deleted', async () => {
    const engine = await start(rulesDir([everyTwoSeconds('witness')]));
    const created = await engine.admin('/admin/rules', { method: 'POST', body: JSON.stringify(everyTwoSeconds('api-tick')) });
    expect(created.status).toBe(201);
    await waitUntil(async () => (await firedEvents(engine, 'api-tick')).length >= 2, { timeoutMs: 10_000, what: 'two ticks of the new rule' });

    const deleted = await engine.admin('/admin/rules/api-tick', { method: 'DELETE' });
    expect([200, 204]).toContain(deleted.status);
    const deletedAt = new Date().toISOString();
    await twoTicksAfter(deletedAt, async () => (await firedEvents(engine, 'witness')).map((e) => e.scheduledFor));
    const fired = await settled(engine, 'api-tick', [deletedAt]);
    expect(fired.filter((e) => e.scheduledFor > deletedAt)).toEqual([]);
    // The ticks evaluated before the deletion were acted on; one evaluated after it (if any) was ignored.
    expectOnePerTick(fired, 'api-tick');
  });

  it('does not fire a tick twice when the engine restarts within a tick', async () => {
    const rules = rulesDir([everyTwoSeconds()]);
    const first = await start(rules);
    await waitUntil(async () => (await firedEvents(first)).length >= 1, { timeoutMs: 10_000, what: 'a first tick' });
    // Restart right after a tick: stop, then start again on the same database.
    const stoppedAt = Date.now();
    await first.stop();
    const second = await start(rules);
    const restartMs = Date.now() - stoppedAt;
    const restartedAt = new Date().toISOString();
    await waitUntil(async () => (await firedEvents(second)).filter((e) => e.scheduledFor > restartedAt).length >= 2, { timeoutMs: 10_000, what: 'two ticks after the restart' });
    expect((await second.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    const fired = await settled(second, 'tick', [new Date().toISOString()]);

    expectOnePerTick(fired);
    // Each tick was fired by exactly one of the two runs, and the stopped one fired nothing after it stopped.
    const logs = [...fireLogs(first.logs), ...fireLogs(second.logs)];
    const perTick = new Map<string, number>();
    for (const entry of logs) perTick.set(entry.scheduled_for, (perTick.get(entry.scheduled_for) ?? 0) + 1);
    expect([...perTick.values()].every((n) => n === 1)).toBe(true);
    expect(logs.every((entry) => entry.outcome === 'accepted')).toBe(true);
    expect(fireLogs(first.logs).every((entry) => Date.parse(entry.time) <= stoppedAt + 100)).toBe(true);
    // The restart took less than a tick, so at most the tick in between was missed (it is not caught up).
    expect(restartMs).toBeLessThan(TICK_MS);
  });

  const postgresOnly = kind.name === 'postgres' ? it : it.skip;

  postgresOnly('fires each tick once with two engine processes sharing the database', async () => {
    const rules = rulesDir([everyTwoSeconds()]);
    const a = await rig.spawn(rules, { LOG_LEVEL: 'debug' });
    const b = await rig.spawn(rules, { LOG_LEVEL: 'debug' });
    const bothUp = new Date().toISOString();

    await waitUntil(async () => (await firedEvents(a)).filter((e) => e.scheduledFor > bothUp).length >= 3, { timeoutMs: 15_000, what: 'three ticks with both running' });
    const disabling = new Date().toISOString();
    // Each process is told: a disable reaches only the process that answers it (see the next test).
    expect((await a.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    expect((await b.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    const fired = await settled(a, 'tick', [new Date().toISOString()]);
    expectOnePerTick(fired);
    expect(await firedEvents(b)).toEqual(fired); // one database, one story

    // Both processes fired every tick while both ran; the database kept the first and refused the second.
    const both = fired.filter((e) => e.scheduledFor > bothUp && e.scheduledFor < disabling).map((e) => e.scheduledFor);
    expect(both.length).toBeGreaterThanOrEqual(2);
    const logsA = fireLogs(a.output);
    const logsB = fireLogs(b.output);
    for (const tick of both) {
      const outcomes = [...logsA, ...logsB].filter((l) => l.scheduled_for === tick).map((l) => l.outcome).sort();
      expect({ tick, outcomes }).toEqual({ tick, outcomes: ['accepted', 'duplicate'] });
    }
    // Each tick's action ran once, with one idempotency key.
    const keys = tickTasks().map((r) => r.idempotencyKey);
    expect(new Set(keys).size).toBe(fired.filter((e) => e.status === 'processed').length);
  });

  postgresOnly('stops firing on every engine process when the rule is disabled through one of them', async () => {
    // The witness's ticks in b's own log show that b's scheduler ran while the rule was disabled.
    const rules = rulesDir([everyTwoSeconds(), everyTwoSeconds('witness')]);
    const a = await rig.spawn(rules, { LOG_LEVEL: 'debug' });
    const b = await rig.spawn(rules, { LOG_LEVEL: 'debug' });
    await waitUntil(async () => (await firedEvents(a, 'tick')).length >= 1, { what: 'a first tick' });

    // An operator's call reaches one replica (whichever the load balancer picks).
    expect((await a.admin('/admin/rules/tick/disable', { method: 'POST' })).status).toBe(200);
    const disabledAt = new Date().toISOString();
    await twoTicksAfter(disabledAt, () => fireLogs(b.output).filter((l) => l.rule === 'witness').map((l) => l.scheduled_for));
    expect((await firedEvents(b, 'tick')).filter((e) => e.scheduledFor > disabledAt).map((e) => e.id)).toEqual([]);
    expect((await body(b.admin('/admin/rules/tick'))).enabled).toBe(false);
  });
});
