/**
 * Three engine processes on one PostgreSQL database (SPEC sections 10 and 12;
 * issues 9 and 13), with events sent to all three and the simulator's
 * webhooks spread over them by a balancer (support/replicas.ts). Every event is
 * processed once and every action sent once, also when a replica is SIGKILLed
 * mid-burst (its work finished by the others within 10 s of the kill), when
 * each is restarted in turn with SIGTERM under load, and while a cron rule
 * ticks; a rule disabled through one replica stops matching on the others
 * within 1 s; a replica killed while its task.create waits on a slow answer
 * does not stall the others; and one budget of calls per minute holds for all
 * three together. The figures the issues ask for are printed.
 *
 * PostgreSQL only: SQLite is one process's file.
 */
import { postgresOnly } from './support/databases.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { replicaOutput, useReplicas, type ReplicaSet } from './support/replicas.js';
import { waitUntil } from './support/wait.js';
import { notYet } from './support/admin.js';

const TASKS = /^\/v1\/tasks\/?$/;
const TICK_MS = 2000;

const followUp = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Follow-up {{ event.id }}' } }],
};

const tick = {
  id: 'tick',
  schedule: { cron: '*/2 * * * * *' },
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Tick {{ event.data.scheduled_for }}' } }],
};

/** Acts on new tasks titled "Ask …": the causal barrier applies to these (a task the engine has not seen). */
const answer = {
  id: 'answer',
  on: 'task.created',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Ask ' }] },
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Answer {{ event.id }}' } }],
};

const toggled = {
  id: 'toggled',
  on: 'task.updated',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Toggle ' }] },
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Toggled {{ event.id }}' } }],
};

/** Work about project B not done yet: events waiting, action runs unfinished. */
const PROJECT_B_BUSY = `SELECT 1 FROM events WHERE status = 'received' AND scope_parent = 'project:prj_2'
  UNION ALL SELECT 1 FROM action_runs WHERE scope_parent = 'project:prj_2' AND status IN ('pending', 'running', 'retrying')`;

/** A figure for the CI log (console.log in jest adds a stack trace to every line). */
function report(line: string): void {
  process.stdout.write(`\n  [replicas] ${line}\n`);
}

const titleOf = (body: unknown) => String((body as { title?: unknown } | undefined)?.title ?? '');

/** The engines' POST /v1/tasks whose title starts with `prefix`, grouped by title. */
function requestsByTitle(set: ReplicaSet, prefix: string) {
  const groups = new Map<string, ReturnType<ReplicaSet['requests']>>();
  for (const r of set.requests('POST', TASKS)) {
    const title = titleOf(r.body);
    if (!title.startsWith(prefix)) continue;
    groups.set(title, [...(groups.get(title) ?? []), r]);
  }
  return groups;
}

/**
 * Exactly once, seen from both ends: the database holds one execution of
 * `rule` per event, and the simulator saw one Idempotency-Key per event with
 * one change made under it. Resends of a key (a request whose answer was
 * lost with its replica) are allowed only when `resendsAllowed`.
 */
async function expectOnce(set: ReplicaSet, events: TestEvent[], rule: string, prefix: string, resendsAllowed: boolean): Promise<number> {
  const ids = events.map((e) => e.id!);
  const executions = await set.sql<{ event_id: string; n: string }>(
    'SELECT event_id, COUNT(*) AS n FROM executions WHERE rule_id = $1 AND event_id = ANY($2) GROUP BY event_id', [rule, ids]);
  expect(executions.filter((e) => Number(e.n) !== 1)).toEqual([]);
  expect(executions).toHaveLength(ids.length);
  const groups = requestsByTitle(set, prefix);
  const keysOf = (id: string) => new Set((groups.get(`${prefix}${id}`) ?? []).map((r) => r.idempotencyKey));
  expect(ids.filter((id) => keysOf(id).size !== 1)).toEqual([]);
  const keys = ids.map((id) => [...keysOf(id)][0]!);
  expect(keys.filter((k) => set.sim.effectsByIdempotencyKey.get(k) !== 1)).toEqual([]);
  const resent = ids.filter((id) => (groups.get(`${prefix}${id}`)?.length ?? 0) > 1);
  if (!resendsAllowed) expect(resent).toEqual([]);
  // This rule's runs only: the cron rule of the set keeps firing, so its latest run may be under way.
  expect(await set.sql("SELECT id, status, error_code FROM action_runs WHERE rule_id = $1 AND status IN ('failed', 'pending', 'running', 'retrying')", [rule])).toEqual([]);
  return resent.length;
}

/** Per replica, the POST /v1/tasks it sent: that the load really was spread. */
function spread(set: ReplicaSet, since: number): string {
  return set.replicas.map((r) => `#${r.index}: ${set.sent.filter((s) => s.replica === r.index && s.at >= since && s.method === 'POST').length}`).join(', ');
}

/**
 * Sends fresh events, spread over the live replicas, about 60 a second (rounds
 * of 12 at least 200 ms apart: a steady load the replicas keep up with, not a
 * flood that would leave a backlog behind), until `work` is done; resolves
 * with them all.
 */
async function underLoad(set: ReplicaSet, make: () => TestEvent, work: Promise<unknown>, load: Load = { hold: false, round: Promise.resolve() }): Promise<TestEvent[]> {
  let finished = false;
  const done = work.finally(() => (finished = true));
  const sent: TestEvent[] = [];
  while (!finished) {
    if (load.hold) {
      await waitUntil(() => finished || !load.hold, { intervalMs: 10, what: 'the load to resume' });
      continue;
    }
    const next = Date.now() + 200;
    const round = Array.from({ length: 12 }, make);
    load.round = set.deliverAll(round, { senders: 3 });
    await load.round;
    sent.push(...round);
    await waitUntil(() => finished || Date.now() >= next, { intervalMs: 10, what: 'the next round' });
  }
  await done;
  return sent;
}

/** Lets a scenario hold `underLoad` between rounds: `hold` stops it after `round`, the one being delivered. */
interface Load {
  hold: boolean;
  round: Promise<void>;
}

function withOutput(set: ReplicaSet, error: unknown): never {
  (error as Error).message += `\n${replicaOutput(set)}`;
  throw error;
}

const onPostgres = (await postgresOnly('replicas')) ? describe : describe.skip;

onPostgres('three replicas on one PostgreSQL database', () => {
  const set = useReplicas({
    count: 3,
    rules: [followUp, tick, answer, toggled],
    // A task.create may wait 8 s on the slow answer below without timing out; no budget or rate limit in the way.
    env: { SERVICE_TIMEOUT_MS: '10000', SERVICE_RATE_LIMIT_PER_MINUTE: '1000000' },
    simulator: { rateLimitPerMinute: 1_000_000 },
  });

  it('processes every event once and sends every action once', async () => {
    const started = Date.now();
    const events = Array.from({ length: 240 }, () => aTaskEvent('task.completed', { project_id: 'prj_2' }));
    await set.deliverAll(events);
    await set.settle().catch((error: unknown) => withOutput(set, error));
    await expectOnce(set, events, 'follow-up', 'Follow-up ', false);
    report(`a: 240 events over 3 replicas, follow-ups sent by ${spread(set, started)}`);
  }, 60_000);

  // LOG_LEVEL=warn here: few log lines, but a warning Node prints for a dependency goes to stderr at any level.
  it('writes nothing but JSON log lines meanwhile (no stray warning of a dependency, such as pg deprecating queued queries)', () => {
    const lines = set.replicas.flatMap((r) => r.generations.flatMap((g) => g.output.join('').split('\n'))).filter((line) => line.trim() !== '');
    const notJson = lines.filter((line) => {
      try {
        return typeof JSON.parse(line) !== 'object';
      } catch {
        return true;
      }
    });
    expect(notJson).toEqual([]);
  });

  it('finishes the work of a replica SIGKILLed mid-burst within 10 s of the kill', async () => {
    const events = Array.from({ length: 300 }, () => aTaskEvent('task.completed', { project_id: 'prj_2' }));
    let kill: Promise<number> = Promise.resolve(0);
    const ackedBeforeKill = new Set<string>();
    // Answers take a while, so the victim has requests in flight (and work claimed behind them) when it dies.
    set.sim.setFaults({ latencyMs: 300 });
    const victimBusy = () => set.sent.filter((s) => s.replica === 1 && s.answeredAt === undefined).length >= 3;
    kill = waitUntil(victimBusy, { intervalMs: 5, what: 'replica 1 to have requests in flight' }).then(() => set.stop(1, 'SIGKILL'));
    try {
      await set.deliverAll(events, { senders: 16, onAck: (_, event) => void (set.replicas[1].process && ackedBeforeKill.add(event.id!)) });
      const killedAt = await kill;
      set.sim.setFaults({ latencyMs: 0 });
      // The kill must have caught the victim with work in hand, or this test proves nothing.
      const inHand = set.sent.filter((s) => s.replica === 1 && s.at <= killedAt && (s.answeredAt ?? Infinity) > killedAt);
      expect(inHand.length).toBeGreaterThan(0);
      await set.settle(30_000);
      // When the database recorded the last of that work finished (an execution ends with its last action run).
      const [{ last }] = await set.sql<{ last: string }>(
        "SELECT MAX(finished_at) AS last FROM executions WHERE rule_id = 'follow-up' AND event_id = ANY($1)", [[...ackedBeforeKill]]);
      const takeoverMs = Math.max(0, Date.parse(last) - killedAt);
      const resent = await expectOnce(set, events, 'follow-up', 'Follow-up ', true);
      report(`b: work acknowledged before the kill finished ${(takeoverMs / 1000).toFixed(2)} s after it (${ackedBeforeKill.size} events, ${inHand.length} request(s) of the victim in flight at the kill; ${resent} action(s) sent again under the same Idempotency-Key)`);
      expect(takeoverMs).toBeLessThanOrEqual(10_000);
    } finally {
      set.sim.setFaults({ latencyMs: 0 });
      await kill.catch(() => undefined);
      await set.restart(1);
    }
  }, 90_000);

  it('fires each cron tick once while a replica is killed', async () => {
    const killedAt = await set.stop(2, 'SIGKILL');
    try {
      const ticksAfterKill = () => [...requestsByTitle(set, 'Tick ').keys()].map((t) => t.slice('Tick '.length)).filter((t) => Date.parse(t) > killedAt + 500);
      await waitUntil(() => ticksAfterKill().length >= 3 || notYet(`ticks since the kill: ${ticksAfterKill().join(', ')}`), {
        timeoutMs: 5 * TICK_MS + 5_000, what: 'three ticks after the kill',
      });
      await set.settle();
      const ticks = ticksAfterKill().sort();
      // Consecutive ticks: none missed while a replica was away.
      for (let i = 1; i < ticks.length; i++) expect(Date.parse(ticks[i]) - Date.parse(ticks[i - 1])).toBe(TICK_MS);
      const fired = await set.sql<{ event_id: string; n: string }>(
        "SELECT event_id, COUNT(*) AS n FROM executions WHERE rule_id = 'tick' GROUP BY event_id");
      expect(fired.filter((f) => Number(f.n) !== 1)).toEqual([]);
      const created = [...set.sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith('Tick '));
      expect(created.filter((t, i) => created.indexOf(t) !== i)).toEqual([]);
      for (const t of ticks) expect(created).toContain(`Tick ${t}`);
      report(`c: ${ticks.length} ticks while a replica was dead, each fired once (${fired.length} ticks in all so far)`);
    } finally {
      await set.restart(2);
    }
  }, 60_000);

  it('loses and repeats nothing in a rolling restart under load (SIGTERM one replica at a time)', async () => {
    const took: string[] = [];
    const restarts = (async () => {
      for (const r of set.replicas) {
        const stopping = await set.stop(r.index, 'SIGTERM');
        const stopped = Date.now();
        await set.restart(r.index);
        took.push(`#${r.index} stopped in ${((stopped - stopping) / 1000).toFixed(1)} s, up again in ${((Date.now() - stopped) / 1000).toFixed(1)} s`);
      }
    })();
    const events = await underLoad(set, () => aTaskEvent('task.completed', { project_id: 'prj_2' }), restarts);
    await set.settle(30_000).catch((error: unknown) => withOutput(set, error));
    await expectOnce(set, events, 'follow-up', 'Follow-up ', false);
    report(`d: rolling restart of 3 replicas under load (${took.join('; ')}): ${events.length} events, each acted on once`);
  }, 90_000);

  it('stops matching a rule on every replica within 1 s of disabling it through one', async () => {
    const [first] = set.live();
    const disabled = await first.admin('/admin/rules/toggled/disable', { method: 'POST' });
    expect(disabled.status).toBe(200);
    const disabledAt = Date.now();
    try {
      // One event every 100 ms to the other replicas, for 2 s.
      const others = set.live().filter((e) => e !== first);
      const sent: Array<{ event: TestEvent; at: number }> = [];
      for (let i = 0; Date.now() - disabledAt < 2_000; i++) {
        const event = aTaskEvent('task.updated', { title: `Toggle ${i}` });
        const at = Date.now();
        expect((await deliver(others[i % others.length].url, event)).status).toBe(202);
        sent.push({ event, at });
        await waitUntil(() => Date.now() >= at + 100, { intervalMs: 10, what: 'the next event' });
      }
      await set.settle();
      const matched = new Set((await set.sql<{ event_id: string }>("SELECT event_id FROM executions WHERE rule_id = 'toggled'")).map((r) => r.event_id));
      const lastMatchMs = Math.max(0, ...sent.filter((s) => matched.has(s.event.id!)).map((s) => s.at - disabledAt));
      report(`f: the last event matching a rule disabled through another replica arrived ${lastMatchMs} ms after the disable`);
      expect(sent.filter((s) => s.at - disabledAt >= 1_000 && matched.has(s.event.id!)).map((s) => s.at - disabledAt)).toEqual([]);
    } finally {
      expect((await first.admin('/admin/rules/toggled/enable', { method: 'POST' })).status).toBe(200);
    }
  }, 30_000);

  it('keeps acting on other projects when a replica dies while its task.create waits on a slow answer', async () => {
    await set.settle();
    // The next POST /tasks is held 8 s by the simulator: the one the project A event causes.
    set.sim.setFaults({ script: [{ method: 'POST', pathPrefix: '/tasks', delayMs: 8_000 }] });
    const inA = aTaskEvent('task.created', { project_id: 'prj_1', title: 'Ask A' });
    expect((await deliver(set.any().url, inA)).status).toBe(202);
    const held = await waitUntil(() => set.sent.find((s) => s.method === 'POST' && s.answeredAt === undefined), { what: 'the slow task.create to be sent' });
    const victim = held.replica;
    const inB = () => aTaskEvent('task.created', { project_id: 'prj_2', title: 'Ask B' });
    let killedAt = 0;
    let endedAt = 0;
    const load: Load = { hold: false, round: Promise.resolve() };
    const scenario = (async () => {
      // Load on every replica for a second, then the kill, then three seconds on the survivors.
      await waitUntil(() => Date.now() >= held.at + 1_000, { intervalMs: 20, what: 'a second of load' });
      // Project B quiet at the kill: any replica claims project B's events, and a project B create the victim had in
      // flight would rightly hold project B back until the victim is declared dead (the mid-burst kill measures that).
      load.hold = true;
      await load.round;
      await waitUntil(async () => (await set.sql(PROJECT_B_BUSY)).length === 0, { intervalMs: 20, what: 'project B to be quiet' });
      killedAt = await set.stop(victim, 'SIGKILL');
      load.hold = false;
      await waitUntil(() => Date.now() >= killedAt + 3_000, { intervalMs: 20, what: 'three seconds of load after the kill' });
      endedAt = Date.now();
    })();
    try {
      const events = await underLoad(set, inB, scenario, load);
      const times = [killedAt, ...set.sent.filter((s) => s.replica !== victim && s.at > killedAt && s.at <= endedAt).map((s) => s.at), endedAt].sort((a, b) => a - b);
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      const longestPauseMs = Math.max(...gaps);
      const pauseFrom = times[gaps.indexOf(longestPauseMs)] - killedAt;
      report(`g: longest pause of the surviving replicas' requests after the kill: ${longestPauseMs} ms, from ${pauseFrom} ms after the kill (${events.length} project B events)`);
      expect(longestPauseMs).toBeLessThanOrEqual(1_000);
      await set.settle(40_000);
      await expectOnce(set, [inA, ...events], 'answer', 'Answer ', true);
    } finally {
      await scenario.catch(() => undefined);
      if (!set.replicas[victim].process) await set.restart(victim);
    }
  }, 90_000);
});

onPostgres('three replicas with one budget of 120 calls per minute', () => {
  // The simulator would refuse past 1,000 a minute: it is the engines' own budget that is measured here.
  const set = useReplicas({ count: 3, rules: [followUp], env: { SERVICE_RATE_LIMIT_PER_MINUTE: '120' }, simulator: { rateLimitPerMinute: 1_000_000 } });

  it('never sends more than 120 requests in any 60 s window, and none twice', async () => {
    const events = Array.from({ length: 420 }, () => aTaskEvent('task.completed'));
    await set.deliverAll(events);
    const first = await waitUntil(() => set.sent[0], { what: 'the first request' });
    await waitUntil(() => Date.now() >= first.at + 65_000, { timeoutMs: 70_000, intervalMs: 250, what: '65 s of sending' });
    const times = set.requests('POST', TASKS).map((r) => Date.parse(r.time)).sort((a, b) => a - b);
    let busiest = 0;
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= 60_000) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    const keys = set.requests('POST', TASKS).map((r) => r.idempotencyKey);
    const twice = keys.filter((k, i) => keys.indexOf(k) !== i);
    report(`e: ${times.length} requests in ${((times.at(-1)! - times[0]) / 1000).toFixed(0)} s over 3 replicas, at most ${busiest} in any 60 s window; ${twice.length} sent twice`);
    expect(busiest).toBeLessThanOrEqual(120);
    // The budget was used, not merely unused: a stalled engine must not pass.
    expect(busiest).toBeGreaterThanOrEqual(100);
    expect(twice).toEqual([]);
  }, 100_000);
});
