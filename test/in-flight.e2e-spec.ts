/**
 * How many action runs one engine performs at once (workers.ts MAX_IN_FLIGHT):
 * one second's worth of the rate budget, up to 256. A run holds its slot until
 * its outcome is committed; with fewer slots, the runs created while they were
 * all held were stored and claimed again later instead of being handed to the
 * action loop in the commit that created them.
 */
import { databasesUnderTest } from './support/databases.js';
import { aTaskEvent, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';
import type { RequestLogEntry } from '../src/simulator/simulator.core.js';

const followUp = {
  id: 'follow-up',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } }],
};

/**
 * The most requests the service was answering at one moment (each from when it was logged until it was answered),
 * each counted `trimMs` less at both ends. Both ends are the simulator's clock in whole milliseconds, truncated alike.
 * (Not the time logged plus `durationMs`: that duration starts before the body is read and the time after, so on a
 * busy machine an answer's end came out a few milliseconds late and overlapped the next request of its slot.)
 */
function mostAtOnce(requests: RequestLogEntry[], trimMs = 0): number {
  const edges = requests.flatMap((r) => {
    const at = Date.parse(r.time);
    return [
      [at + trimMs, 1],
      [Date.parse(r.answeredAt ?? r.time) - trimMs, -1],
    ];
  });
  // At one instant, an answer ends before an arrival begins.
  edges.sort(([a, da], [b, db]) => a - b || da - db);
  let now = 0;
  let most = 0;
  for (const [, delta] of edges) most = Math.max(most, (now += delta));
  return most;
}

const kinds = await databasesUnderTest('actions in flight');

describe.each(kinds)('actions in flight on $name', (kind) => {
  const rig = useRig(kind, { simulator: { rateLimitPerMinute: 100_000 } });

  it('performs up to 256 action runs at once when the rate budget allows, and no more', async () => {
    // Every request takes a second and a half: the runs pile up in flight. The timeout well past it (the suites' 2 s
    // cut off answers that a machine busy with other work delivered late, and the runs were sent again).
    rig.sim.setFaults({ latencyMs: 1_500 });
    const engine = await rig.start([followUp], { SERVICE_RATE_LIMIT_PER_MINUTE: '100000', SERVICE_TIMEOUT_MS: '10000' });
    const events = Array.from({ length: 300 }, () => aTaskEvent('task.completed'));
    for (let i = 0; i < events.length; i += 50) {
      const answers = await Promise.all(events.slice(i, i + 50).map((event) => deliver(engine.url, event)));
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 202));
    }
    const taskPosts = () => rig.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks');
    await waitUntil(() => taskPosts().filter((r) => r.status !== undefined).length >= events.length, {
      timeoutMs: 30_000,
      what: 'every follow-up to be answered',
    });
    expect(taskPosts().map((r) => r.status)).toEqual(events.map(() => 201));
    expect(mostAtOnce(taskPosts())).toBeGreaterThan(64);
    // A 257th run at once would overlap the others for most of its 1.5 s, not for a millisecond.
    expect(mostAtOnce(taskPosts(), 1)).toBeLessThanOrEqual(256);
  }, 60_000);
});
