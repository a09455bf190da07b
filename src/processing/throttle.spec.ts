import { aRule } from '../../test/support/rule-factory.js';
import { previewActions } from './dry-run.js';
import { throttleKey } from './throttle.js';

const event = { id: 'evt_1', type: 'task.completed', data: { task: { id: 'tsk_1', project_id: 'prj_1' } } };
// 20:30 UTC on New Year's Day is already 05:30 on 2 January in Tokyo.
const at = new Date('2026-01-01T20:30:00.000Z');

function throttled(key: string | undefined, timezone?: string) {
  return aRule({
    ...(timezone ? { on: undefined, schedule: { cron: '0 9 * * *', timezone } } : {}),
    options: { throttle: { limit: 1, windowSeconds: 60, ...(key === undefined ? {} : { key }) } },
    actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: key ?? 'x' } }],
  });
}

describe(throttleKey.name, () => {
  it.each([
    ['no throttle', aRule(), null],
    ['a throttle without a key: one window for the rule', throttled(undefined), ''],
    ['a key from the event', throttled('{{ event.data.task.project_id }}'), 'prj_1'],
    ['`now` in UTC for a rule without a time zone', throttled('{{ now.date }} {{ now.hour }}'), '2026-01-01 20'],
    ['`now` in the rule\'s time zone', throttled('{{ now.date }} {{ now.hour }}', 'Asia/Tokyo'), '2026-01-02 5'],
  ])('renders %s', (_case, rule, expected) => {
    expect(throttleKey(rule, event, at)).toBe(expected);
  });

  it('renders `now` exactly as the rule\'s actions see it', async () => {
    const rule = throttled('{{ now.iso }}', 'America/Los_Angeles');
    const [preview] = await previewActions(rule, event, at);
    expect(throttleKey(rule, event, at)).toBe((preview.request?.body as { title: string }).title);
  });

  it('cuts a key to 300 characters', () => {
    const rule = throttled(`${'k'.repeat(400)}{{ rule.id }}`);
    expect(throttleKey(rule, event, at)).toHaveLength(300);
  });
});
