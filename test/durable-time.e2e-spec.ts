/**
 * Durable time (SPEC section 11): a delay is a row in the database, so it
 * survives a SIGKILL of the engine, resumes exactly once however long the
 * engine was down, and with two replicas on one PostgreSQL database every
 * waiting execution resumes exactly once. The engines are real child processes.
 */
import { allPages, quietEngine } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import { rulesDir, type EngineProcess } from './support/engine.js';
import { aTaskEvent, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

const PREFIX = 'Follow-up: ';

const followUpLater = {
  id: 'follow-up-later',
  on: 'task.completed',
  actions: [
    { type: 'delay', params: { duration: 'PT2S' } },
    { type: 'task.create', params: { project_id: 'prj_1', title: `${PREFIX}{{ event.id }}` } },
  ],
};

const kinds = await databasesUnderTest('durable time');

describe.each(kinds)('durable delays on $name', (kind) => {
  const rig = useRig(kind);

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function waiting(engine: EngineProcess): Promise<any[]> {
    return (await allPages(engine, '/admin/executions?status=waiting', 500)).items;
  }

  /** Every event acted on once: one task each, one effect per Idempotency-Key. */
  async function expectEachActedOnce(engine: EngineProcess, eventIds: string[]) {
    const titles = () => [...rig.sim.state.tasks.values()].map((t) => String(t.title)).filter((t) => t.startsWith(PREFIX));
    await waitUntil(() => new Set(titles()).size >= eventIds.length, { timeoutMs: 30_000, what: `${eventIds.length} follow-up tasks` });
    await quietEngine(engine, 30_000);
    expect(titles().sort()).toEqual(eventIds.map((id) => `${PREFIX}${id}`).sort());
    expect([...rig.sim.effectsByIdempotencyKey].filter(([, n]) => n !== 1)).toEqual([]);
  }

  it('a SIGKILL while executions wait loses none of them; after downtime longer than the delay each runs at once, once', async () => {
    const rules = rulesDir([followUpLater]);
    const first = await rig.spawn(rules, { LOG_LEVEL: 'warn' });
    const events = Array.from({ length: 20 }, () => aTaskEvent('task.completed'));
    for (const event of events) expect((await deliver(first.url, event)).status).toBe(202);
    const held = await waitUntil(async () => {
      const found = await waiting(first);
      return found.length === events.length ? found : undefined;
    });
    await first.kill('SIGKILL');
    const lastResume = Math.max(...held.map((x: { resume_at: string }) => Date.parse(x.resume_at)));
    // Down for longer than the delay: every resume is overdue when the engine comes back.
    await waitUntil(() => Date.now() > lastResume + 500, { timeoutMs: 10_000, what: 'the delays to be overdue' });
    expect([...rig.sim.state.tasks.values()].filter((t) => String(t.title).startsWith(PREFIX))).toEqual([]);
    const started = Date.now();
    const second = await rig.spawn(rules, { LOG_LEVEL: 'warn' });
    await expectEachActedOnce(second, events.map((e) => e.id!));
    process.stdout.write(`\ndurable time (${kind.name}): 20 overdue executions resumed and acted ${Date.now() - started} ms after the engine was started again\n`);
    expect((await allPages(second, '/admin/executions?status=succeeded', 500)).items).toHaveLength(events.length);
  });

  if (kind.name === 'postgres') {
    it('two replicas with 200 executions due at once: each resumes exactly once', async () => {
      const rules = rulesDir([followUpLater]);
      const replicas = [await rig.spawn(rules, { LOG_LEVEL: 'warn' }), await rig.spawn(rules, { LOG_LEVEL: 'warn' })];
      const events = Array.from({ length: 200 }, () => aTaskEvent('task.completed'));
      await Promise.all(events.map(async (event, i) => expect((await deliver(replicas[i % 2]!.url, event)).status).toBe(202)));
      await expectEachActedOnce(replicas[0]!, events.map((e) => e.id!));
      await quietEngine(replicas[1]!, 30_000);
      const delays = (await allPages(replicas[0]!, '/admin/actions?status=succeeded', 500)).items.filter((r: { type: string }) => r.type === 'delay');
      expect(delays).toHaveLength(200);
      expect(delays.every((r: { attempts: number }) => r.attempts === 1)).toBe(true);
    });
  }
});
