/**
 * The example rules in rules/ and the events in examples/events/ are what
 * people copy, so they are held to what the README says of them: every rule
 * file loads through the engine's own validation (loadRuleFiles, which the
 * rule registry runs at start-up and on reload, and rules:validate), and each
 * example of "Time and sets" (SPEC 11), dry-run by rules:test against its
 * example event with the simulator as the service, would send exactly the
 * requests its section describes.
 */
import { readdirSync } from 'node:fs';
import { loadRuleFiles, loadRulePath } from '../rules/rule-files.js';
import { startSimulator, type Simulator, type Task } from '../simulator/simulator.js';
import type { CliContext } from './cli-output.js';
import { rulesTest } from './rules-test.js';
import { rulesValidate } from './rules-validate.js';

const RULES = 'rules';
const EVENTS = 'examples/events';
const ruleFiles = readdirSync(RULES).filter((name) => name.endsWith('.json') && name !== 'rule.schema.json').sort();

function capture(env: CliContext['env'] = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env, stdout: (line) => out.push(line), stderr: (line) => err.push(line), color: false };
  return { context, out, err };
}

describe('the example rules in rules/', () => {
  it.each(ruleFiles)('%s loads through the engine\'s validation without a problem', async (name) => {
    const { rules, problems } = await loadRulePath(`${RULES}/${name}`);
    expect(problems).toEqual([]);
    expect(rules.length).toBeGreaterThanOrEqual(1);
    expect(rules.every((rule) => rule.definition.$schema === './rule.schema.json')).toBe(true);
  });

  it('load together as the engine loads the folder: every file, distinct ids', async () => {
    const { rules, problems, files } = await loadRuleFiles(RULES);
    expect(problems).toEqual([]);
    expect(files).toHaveLength(ruleFiles.length);
    expect(new Set(rules.map((rule) => rule.id)).size).toBe(rules.length);
  });

  it('pass npm run rules:validate', async () => {
    const { context, out } = capture();
    expect(await rulesValidate([RULES], context)).toBe(0);
    expect(out).toEqual([expect.stringMatching(new RegExp(`^${ruleFiles.length} files, \\d+ rules valid, 0 problems$`))]);
  });
});

/** What rules:test --json says of one example rule and event, with the simulator answering the lookups. */
interface Preview {
  matched: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  actions: any[];
}

describe('the time and sets examples, dry-run against their example events', () => {
  let sim: Simulator;
  beforeEach(async () => {
    sim = await startSimulator({ workflowRunDelayMs: 10 });
  });
  afterEach(async () => {
    await sim.close();
  });

  async function dryRun(rule: string, event: string, now = '2026-11-23T10:00:00.000Z'): Promise<Preview> {
    const { context, out, err } = capture({ SERVICE_API_KEY: 'ac_test_examples', SERVICE_API_URL: sim.url });
    const code = await rulesTest([`${RULES}/${rule}`, '--event', `${EVENTS}/${event}`, '--now', now, '--json'], context);
    expect({ code, err }).toEqual({ code: 0, err: [] });
    return JSON.parse(out.join('\n')) as Preview;
  }
  const task = (id: string): Task => sim.state.tasks.get(id)!;
  const addTask = (fields: Partial<Task> & { project_id: string }): Task => {
    const id = sim.state.nextId('tsk');
    const at = '2026-11-01T08:00:00.000Z';
    const added: Task = { id, title: id, status: 'open', assignee_id: null, due_date: null, priority: 'normal', created_at: at, updated_at: at, ...fields };
    sim.state.tasks.set(id, added);
    return added;
  };
  const requestsOf = (preview: Preview) =>
    preview.actions.flatMap((a) => (a.items ?? [a]).filter((x: { request?: unknown }) => x.request).map((x: { request: { method: string; path: string; body?: unknown } }) => [x.request.method, x.request.path, x.request.body]));

  describe('escalate-stale-task.json with task-created.json', () => {
    it('waits P3D, then (the task still open) raises it to urgent and triggers wf_escalate', async () => {
      const preview = await dryRun('escalate-stale-task.json', 'task-created.json');
      expect(preview.matched).toBe(true);
      expect(preview.actions.map((a) => a.type)).toEqual(['delay', 'check', 'task.update', 'workflow.trigger']);
      expect(preview.actions[0].delay).toEqual({ duration: 'P3D', ms: 3 * 24 * 3600 * 1000 });
      expect(preview.actions[1].check.passed).toBe(true);
      expect(requestsOf(preview)).toEqual([
        ['PATCH', '/tasks/tsk_1', { priority: 'urgent' }],
        ['POST', '/workflows/wf_escalate/trigger', { task_id: 'tsk_1', project_id: 'prj_1', title: 'Draft the release notes', created_at: '2026-11-20T08:30:00.000Z' }],
      ]);
    });

    it('passes the check when the task is the only open one of its project', async () => {
      task('tsk_2').status = 'completed';
      expect((await dryRun('escalate-stale-task.json', 'task-created.json')).actions[1].check.passed).toBe(true);
    });

    it.each([
      ['completed meanwhile', () => { task('tsk_1').status = 'completed'; }],
      ['deleted meanwhile', () => { sim.state.tasks.delete('tsk_1'); }],
    ])('stops at the check when the task was %s', async (_case, change) => {
      change();
      expect((await dryRun('escalate-stale-task.json', 'task-created.json')).actions[1].check.passed).toBe(false);
    });
  });

  it('close-tasks-of-archived-project.json with project-archived.json completes each open task of prj_2, one request per task', async () => {
    const open = addTask({ project_id: 'prj_2', status: 'in_progress' });
    addTask({ project_id: 'prj_2', status: 'completed' });
    addTask({ project_id: 'prj_1' });
    const preview = await dryRun('close-tasks-of-archived-project.json', 'project-archived.json');
    expect(preview.matched).toBe(true);
    expect(preview.actions[0].items.map((item: { index: number }) => item.index)).toEqual([0, 1]);
    expect(requestsOf(preview)).toEqual([
      ['PATCH', '/tasks/tsk_3', { status: 'completed' }],
      ['PATCH', `/tasks/${open.id}`, { status: 'completed' }],
    ]);
  });

  it('raise-overdue-tasks.json with schedule-fired.json raises the tasks of prj_1 due before today in Berlin, and only those', async () => {
    task('tsk_1').due_date = '2026-11-20';
    task('tsk_2').due_date = '2026-11-23'; // due today: not overdue yet
    const low = addTask({ project_id: 'prj_1', due_date: '2026-11-22', priority: 'low' });
    addTask({ project_id: 'prj_1', due_date: '2026-11-02', priority: 'urgent' }); // already above high
    addTask({ project_id: 'prj_1', due_date: '2026-11-02', status: 'completed' });
    addTask({ project_id: 'prj_2', due_date: '2026-11-02' }); // another project
    const preview = await dryRun('raise-overdue-tasks.json', 'schedule-fired.json', '2026-11-23T08:00:00.000Z');
    expect(preview.matched).toBe(true);
    expect(requestsOf(preview)).toEqual([
      ['PATCH', '/tasks/tsk_1', { priority: 'high' }],
      ['PATCH', `/tasks/${low.id}`, { priority: 'high' }],
    ]);
  });

  it('raise-overdue-tasks.json does not match when no task of prj_1 has a due date', async () => {
    expect((await dryRun('raise-overdue-tasks.json', 'schedule-fired.json', '2026-11-23T08:00:00.000Z')).matched).toBe(false);
  });

  it('notify-when-edits-settle.json with task-title-edited.json triggers wf_notify with the edited title', async () => {
    const preview = await dryRun('notify-when-edits-settle.json', 'task-title-edited.json');
    expect(preview.matched).toBe(true);
    expect(requestsOf(preview)).toEqual([
      ['POST', '/workflows/wf_notify/trigger', { task_id: 'tsk_1', project_id: 'prj_1', title: 'Draft the release notes for 1.1', edited_at: '2026-11-23T10:02:41.000Z' }],
    ]);
  });

  it('notify-when-edits-settle.json ignores an edit of the status alone', async () => {
    expect((await dryRun('notify-when-edits-settle.json', 'task-blocked.json')).matched).toBe(false);
  });

  it('operator-task-on-failed-action.json with action-run-failed.json opens a task for the operator with the error', async () => {
    const preview = await dryRun('operator-task-on-failed-action.json', 'action-run-failed.json');
    expect(preview.matched).toBe(true);
    expect(requestsOf(preview)).toEqual([
      ['POST', '/tasks', {
        project_id: 'prj_1',
        assignee_id: 'usr_1',
        priority: 'high',
        title: 'Automation failed: rule welcome-project-owner, user.invite (validation_failed)',
        description:
          'email domain not allowed Action run 5b1f0c3e-9d2a-5e41-a8c7-3f6d2e9b0a14 failed for good after 1 attempts; it came from event ' +
          'evt_example_project_created (project.created). Once the cause is fixed: POST /admin/actions/5b1f0c3e-9d2a-5e41-a8c7-3f6d2e9b0a14/retry.',
      }],
    ]);
  });
});
