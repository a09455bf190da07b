import { Metrics, METRIC_EVENT_TYPES } from './metrics.js';

/** The label sets of one metric's series, read back from its real registry. */
async function seriesOf(metrics: Metrics, name: string): Promise<Array<Record<string, string | number>>> {
  const metric = metrics.registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  return (await metric.get()).values.map((value) => ({ ...value.labels, value: value.value }));
}

describe(Metrics.name, () => {
  describe('event type labels are bounded', () => {
    it('counts 1,000 distinct unknown types in one "other" series', async () => {
      const metrics = new Metrics();
      for (let i = 0; i < 1_000; i += 1) metrics.eventReceived(`spam.type_${i}`, 'accepted');
      expect(await seriesOf(metrics, 'engine_events_received_total')).toEqual([{ type: 'other', outcome: 'accepted', value: 1_000 }]);
    });

    it('does the same for processed events', async () => {
      const metrics = new Metrics();
      for (let i = 0; i < 1_000; i += 1) metrics.eventProcessed(`task.renamed_${i}`, 'ignored');
      expect(await seriesOf(metrics, 'engine_events_processed_total')).toEqual([{ type: 'other', status: 'ignored', value: 1_000 }]);
    });

    it.each([
      'task.created',
      'task.updated',
      'task.completed',
      'project.created',
      'user.invited',
      'workflow.run.completed',
      'schedule.fired',
      'engine.action_run.failed',
      'engine.event.loop_blocked',
    ])('keeps the known type %s as its own label', async (type) => {
      const metrics = new Metrics();
      metrics.eventReceived(type, 'accepted');
      metrics.eventProcessed(type, 'processed');
      expect(await seriesOf(metrics, 'engine_events_received_total')).toEqual([{ type, outcome: 'accepted', value: 1 }]);
      expect(await seriesOf(metrics, 'engine_events_processed_total')).toEqual([{ type, status: 'processed', value: 1 }]);
    });

    it.each([
      ['a near miss in case', 'Task.Created'],
      ['a known type with a suffix', 'task.created.v2'],
      ['a pattern', 'task.*'],
      ['an empty type', ''],
      ['a prototype name', '__proto__'],
      ['a huge type', 'x'.repeat(10_000)],
    ])('counts %s as "other"', async (_name, type) => {
      const metrics = new Metrics();
      metrics.eventReceived(type, 'accepted');
      expect(await seriesOf(metrics, 'engine_events_received_total')).toEqual([{ type: 'other', outcome: 'accepted', value: 1 }]);
    });

    it('never has more type series than the known types and "other"', async () => {
      const metrics = new Metrics();
      for (const type of [...METRIC_EVENT_TYPES, ...Array.from({ length: 500 }, (_, i) => `custom.${i}`)]) {
        metrics.eventReceived(type, 'accepted');
      }
      const types = new Set((await seriesOf(metrics, 'engine_events_received_total')).map((series) => series.type));
      expect(types).toEqual(new Set([...METRIC_EVENT_TYPES, 'other']));
    });
  });

  it('counts storage failures by kind from the counts it is given, without counting any twice', async () => {
    const metrics = new Metrics();
    metrics.storageFailed(new Map([['disk_full', 3]]));
    metrics.storageFailed(new Map([['disk_full', 5], ['read_only', 1]]));
    metrics.storageFailed(new Map([['disk_full', 5], ['read_only', 1]]));
    expect(await seriesOf(metrics, 'engine_storage_failures_total')).toEqual([
      { kind: 'disk_full', value: 5 },
      { kind: 'read_only', value: 1 },
    ]);
  });

  it('adds what was counted between two reads once, in the text a scrape gets as in get()', async () => {
    const metrics = new Metrics();
    for (let i = 0; i < 3; i += 1) metrics.ruleMatched('follow-up', 'matched');
    metrics.ruleMatched('follow-up', 'throttled');
    metrics.actionRun('create_task', 'succeeded', 0.01);
    expect(await metrics.registry.metrics()).toContain('engine_rule_matches_total{rule="follow-up",outcome="matched"} 3');
    metrics.ruleMatched('follow-up', 'matched');
    metrics.ruleMatched('other-rule', 'matched');
    const again = await seriesOf(metrics, 'engine_rule_matches_total');
    expect(again).toEqual([
      { rule: 'follow-up', outcome: 'matched', value: 4 },
      { rule: 'follow-up', outcome: 'throttled', value: 1 },
      { rule: 'other-rule', outcome: 'matched', value: 1 },
    ]);
    expect(await seriesOf(metrics, 'engine_rule_matches_total')).toEqual(again);
    expect(await seriesOf(metrics, 'engine_action_runs_total')).toEqual([{ type: 'create_task', outcome: 'succeeded', value: 1 }]);
  });

  it('keeps one registry per instance', async () => {
    const first = new Metrics();
    const second = new Metrics();
    first.eventReceived('task.created', 'accepted');
    expect(await seriesOf(second, 'engine_events_received_total')).toEqual([]);
  });
});
