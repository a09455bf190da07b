/**
 * `options.throttle` end to end (SPEC section 6): at most `limit` executions per
 * `windowSeconds` per rendered key; the rest are recorded as `throttled`, with
 * the reason in each event's explanation. Events arrive concurrently, as a burst
 * from the service would, on every database under test.
 */
import { allPages, settledEvent } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, deliver, type TestEvent } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

function reviewCompletedTasks(throttle: Record<string, unknown>) {
  return {
    id: 'review-completed',
    name: 'Review completed tasks, a few per project',
    on: 'task.completed',
    actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review: {{ event.data.task.title }}' } }],
    options: { throttle },
  };
}

const perProject = reviewCompletedTasks({ limit: 2, windowSeconds: 60, key: '{{ event.data.task.project_id }}' });

const kinds = await databasesUnderTest('throttle');

describe.each(kinds)('throttled rules on $name', (kind) => {
  const rig = useRig(kind);
  let engine: RunningEngine | undefined;

  async function start(rule: unknown) {
    engine = await rig.start([rule]);
    return engine;
  }

  const reviewsAt = (projectId: string) =>
    rig.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks' && r.status === 201 && (r.body as { project_id?: string }).project_id === projectId);

  async function deliverAll(events: TestEvent[]) {
    const answers = await Promise.all(events.map((e) => deliver(engine!.url, e)));
    expect(answers.map((a) => a.status)).toEqual(events.map(() => 202));
    return Promise.all(events.map((e) => settledEvent(engine!, e.id!, 15_000)));
  }

  it('runs at most `limit` executions per key and records the rest as throttled, under a concurrent burst', async () => {
    await start(perProject);
    const first = Array.from({ length: 5 }, (_, i) => aTaskEvent('task.completed', { project_id: 'prj_1', title: `Task ${i + 1} of prj_1` }));
    const second = Array.from({ length: 2 }, (_, i) => aTaskEvent('task.completed', { project_id: 'prj_2', title: `Task ${i + 1} of prj_2` }));
    const settled = await deliverAll([...first, ...second]);

    // Every event matched the rule; the throttle decided which ones acted.
    expect(settled.map((e) => e.status)).toEqual(settled.map(() => 'processed'));
    const outcomes = (ids: string[]) =>
      settled.filter((e) => ids.includes(e.id)).map((e) => e.rules.find((r: { rule: string }) => r.rule === 'review-completed').outcome).sort();
    expect(outcomes(first.map((e) => e.id!))).toEqual(['matched', 'matched', 'throttled', 'throttled', 'throttled']);
    expect(outcomes(second.map((e) => e.id!))).toEqual(['matched', 'matched']);

    for (const event of settled) {
      const [execution] = event.executions;
      const outcome = event.rules[0].outcome;
      expect(event.rules[0].execution).toBe(execution.id);
      if (outcome === 'throttled') {
        expect(execution).toMatchObject({ status: 'throttled', actions: [] });
      } else {
        expect(execution).toMatchObject({ status: 'succeeded', actions: [expect.objectContaining({ status: 'succeeded' })] });
      }
    }

    const throttled = (await allPages(engine!, '/admin/executions?status=throttled', 500)).items;
    expect(throttled).toHaveLength(3);
    expect(throttled.every((x) => x.rule === 'review-completed')).toBe(true);
    expect(new Set(throttled.map((x) => x.event_id))).toEqual(
      new Set(settled.filter((e) => e.rules[0].outcome === 'throttled').map((e) => e.id)),
    );
    expect((await allPages(engine!, '/admin/executions?status=succeeded', 500)).items).toHaveLength(4);

    expect(reviewsAt('prj_1')).toHaveLength(2);
    expect(reviewsAt('prj_2')).toHaveLength(2);

    const metrics = await (await fetch(`${engine!.url}/metrics`)).text();
    expect(metrics).toMatch(/^engine_rule_matches_total\{rule="review-completed",outcome="throttled"\} 3$/m);
    expect(metrics).toMatch(/^engine_rule_matches_total\{rule="review-completed",outcome="matched"\} 4$/m);
  });

  it('keeps counting across separate bursts within the window', async () => {
    await start(perProject);
    const [one] = await deliverAll([aTaskEvent('task.completed', { project_id: 'prj_1' })]);
    const later = await deliverAll([aTaskEvent('task.completed', { project_id: 'prj_1' }), aTaskEvent('task.completed', { project_id: 'prj_1' })]);
    expect(one.rules[0].outcome).toBe('matched');
    expect(later.map((e) => e.rules[0].outcome).sort()).toEqual(['matched', 'throttled']);
    expect(reviewsAt('prj_1')).toHaveLength(2);
  });

  it('lets executions through again once the window has passed', async () => {
    await start(reviewCompletedTasks({ limit: 1, windowSeconds: 1, key: '{{ event.data.task.project_id }}' }));
    const [first, second] = await deliverAll([aTaskEvent('task.completed'), aTaskEvent('task.completed')]);
    expect([first.rules[0].outcome, second.rules[0].outcome].sort()).toEqual(['matched', 'throttled']);
    // The window counts the executions created in the last windowSeconds: it has passed once the matched one is older.
    const counted = [first, second].find((e) => e.rules[0].outcome === 'matched')!.executions[0];
    const windowEnds = Date.parse(counted.created_at) + 1_000;
    await waitUntil(() => Date.now() > windowEnds, {
      timeoutMs: 2_000,
      what: `the 1 s window of execution ${counted.id} (created ${counted.created_at}) to pass`,
    });
    const [third] = await deliverAll([aTaskEvent('task.completed')]);
    expect(third.rules[0].outcome).toBe('matched');
    expect(reviewsAt('prj_1')).toHaveLength(2);
  });

  it('throttles the rule as a whole when the throttle has no key', async () => {
    await start(reviewCompletedTasks({ limit: 2, windowSeconds: 60 }));
    const settled = await deliverAll([
      aTaskEvent('task.completed', { project_id: 'prj_1' }),
      aTaskEvent('task.completed', { project_id: 'prj_2' }),
      aTaskEvent('task.completed', { project_id: 'prj_1' }),
      aTaskEvent('task.completed', { project_id: 'prj_2' }),
    ]);
    expect(settled.map((e) => e.rules[0].outcome).sort()).toEqual(['matched', 'matched', 'throttled', 'throttled']);
    expect(reviewsAt('prj_1').length + reviewsAt('prj_2').length).toBe(2);
  });
});
