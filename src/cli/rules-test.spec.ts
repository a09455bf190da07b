import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { startSimulator, type Simulator } from '../simulator/simulator.js';
import type { CliContext } from './cli-output.js';
import { parseArgs, rulesTest, USAGE } from './rules-test.js';

const RULES = 'test/fixtures/cli/rules-test';
const EVENTS = 'test/fixtures/cli/events';
const BUILT = 'dist/cli/rules-test.js';

function capture(overrides: Partial<CliContext> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env: {}, stdout: (line) => out.push(line), stderr: (line) => err.push(line), color: false, ...overrides };
  return { context, out, err };
}

async function runTest(args: string[], overrides: Partial<CliContext> = {}) {
  const captured = capture(overrides);
  const code = await rulesTest(args, captured.context);
  return { code, ...captured };
}

describe(rulesTest.name, () => {
  describe('a rule that matches', () => {
    it('shows each condition, the exact requests the actions would send, and a summary', async () => {
      const { code, out, err } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed.json`]);
      expect({ code, err }).toEqual({ code: 0, err: [] });
      expect(out).toEqual([
        expect.stringMatching(/^rule {5}release-follow-up {2}test\/fixtures\/cli\/rules-test\/release-follow-up\.json, version [0-9a-f]{16}, enabled$/),
        `event    evt_cli_release  task.completed  ${EVENTS}/task-completed.json`,
        'listens  yes (on task.completed)',
        'conditions',
        '  ✓ all[0]         event $.data.task.project_id equal "prj_1"  (actual: "prj_1")',
        '  ✓ all[1]         event $.data.task.title matches "^Release"  (actual: "Release 1.0")',
        '  ✓ all[2].any[0]  event $.data.task.assignee_id isNotEmpty true  (actual: "usr_2")',
        '  ✗ all[2].any[1]  event $.data.task.priority equal "high"  (actual: undefined)',
        'actions (the requests they would send; nothing was sent)',
        '  → 1. task.create (review): POST /v1/tasks',
        '      {"project_id":"prj_1","title":"Review: Release 1.0","assignee_id":"usr_2"}',
        '  → 2. workflow.trigger: POST /v1/workflows/wf_notify/trigger',
        '      {"task_id":"dry-run-review"}',
        '✓ match: release-follow-up on evt_cli_release: 3 conditions passed, 2 requests would be sent',
      ]);
    });

    it('matches every event it listens to when the rule has no conditions', async () => {
      const { code, out } = await runTest([`${RULES}/several.json`, '--rule', 'welcome-owner', '--event', `${EVENTS}/project-created.json`]);
      expect(code).toBe(0);
      expect(out.slice(3)).toEqual([
        'conditions none: the rule matches every event it listens to',
        'actions (the requests they would send; nothing was sent)',
        '  → 1. user.invite: POST /v1/users',
        '      {"email":"margaret@example.com","role":"member"}',
        '✓ match: welcome-owner on evt_cli_project: no conditions, 1 request would be sent',
      ]);
    });

    it('shows a template_error instead of a request, and that the actions after it would not run', async () => {
      const { code, out } = await runTest([`${RULES}/several.json`, '--rule', 'broken-template', '--event', `${EVENTS}/task-completed.json`]);
      expect(code).toBe(0);
      expect(out.slice(-3)).toEqual([
        '  ✗ 1. task.update: template_error: params.reviewer: undefined variable "event.data.task.reviewer"',
        '  (the action after it would not run)',
        '✓ match: broken-template on evt_cli_release: no conditions, 0 requests would be sent, 1 action would fail',
      ]);
    });
  });

  describe('a rule that does not match', () => {
    it('marks the failed conditions with their actual values and sends nothing', async () => {
      const { code, out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed-other.json`]);
      expect(code).toBe(0);
      expect(out).toContain('  ✗ all[0]         event $.data.task.project_id equal "prj_1"  (actual: "prj_2")');
      expect(out).toContain('actions  none: the rule did not match');
      expect(out.at(-1)).toBe('✗ no match: release-follow-up on evt_cli_typo: 4 of 4 conditions failed');
    });

    it('says when the rule does not listen to the event type', async () => {
      const { code, out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/project-created.json`]);
      expect(code).toBe(0);
      expect(out[2]).toBe('listens  no: it listens to task.completed, not project.created');
      expect(out.at(-1)).toBe('✗ no match: release-follow-up on evt_cli_project: the rule does not listen to project.created');
    });
  });

  describe('the now fact and disabled rules', () => {
    it('evaluates `now` at the --now instant and says the rule is disabled', async () => {
      const saturday = await runTest([`${RULES}/weekday-only.json`, '--event', `${EVENTS}/task-completed.json`, '--now', '2025-06-07T10:00:00Z']);
      expect(saturday.out[0]).toMatch(/, disabled: the engine would not run it$/);
      expect(saturday.out).toContain('  ✗ all[0]  now $.weekday lessThanInclusive 5  (actual: 6)');
      const monday = await runTest([`${RULES}/weekday-only.json`, '--event', `${EVENTS}/task-completed.json`, '--now', '2025-06-09T10:00:00Z']);
      expect(monday.out).toContain('  ✓ all[0]  now $.weekday lessThanInclusive 5  (actual: 1)');
      expect(monday.out).toContain('  → 1. task.delete: DELETE /v1/tasks/tsk_2');
    });
  });

  describe('lookups', () => {
    it('shows on the condition that lookups need SERVICE_API_KEY when it is not set', async () => {
      const { code, out } = await runTest([`${RULES}/archive-when-done.json`, '--event', `${EVENTS}/task-completed.json`]);
      expect(code).toBe(0);
      expect(out).toContain(
        `  ! all[0]  tasks {"project_id":"{{ event.data.task.project_id }}"} $[?(@.status != 'completed')] isEmpty true  ` +
          '(error: tasks lookup "prj_1" failed: lookups need SERVICE_API_KEY, which is not set)',
      );
      expect(out).toContain('  note: set SERVICE_API_KEY (and SERVICE_API_URL) to let lookups read the service: only GET requests are sent');
      expect(out.at(-1)).toBe('✗ no match: archive-when-done on evt_cli_release: could not be evaluated (see above)');
    });

    it('names the variable when SERVICE_API_KEY is malformed, on the condition only', async () => {
      const { code, out } = await runTest([`${RULES}/archive-when-done.json`, '--event', `${EVENTS}/task-completed.json`], {
        env: { SERVICE_API_KEY: 'sk_live_123' },
      });
      expect(code).toBe(0);
      expect(out.join('\n')).toContain('(error: tasks lookup "prj_1" failed: SERVICE_API_KEY: must start with ac_live_ (production) or ac_test_ (sandbox))');
    });

    describe('with the service', () => {
      let sim: Simulator;
      beforeAll(async () => {
        sim = await startSimulator();
      });
      afterAll(async () => {
        await sim.close();
      });

      it('reads the service with GET requests only, and nothing else is sent', async () => {
        const env = { SERVICE_API_URL: sim.url, SERVICE_API_KEY: 'ac_test_rules_test_spec' };
        const args = [`${RULES}/archive-when-done.json`, '--event', `${EVENTS}/task-completed.json`];
        const open = await runTest(args, { env });
        expect(open.out.at(-1)).toBe('✗ no match: archive-when-done on evt_cli_release: 1 of 1 condition failed');
        for (const task of sim.state.tasks.values()) if (task.project_id === 'prj_1') task.status = 'completed';
        const done = await runTest(args, { env });
        expect(done.out).toContain(`  ✓ all[0]  tasks {"project_id":"{{ event.data.task.project_id }}"} $[?(@.status != 'completed')] isEmpty true  (actual: undefined)`);
        expect(done.out).toContain('  → 1. project.archive: DELETE /v1/projects/prj_1');
        expect(sim.requests.map((r) => `${r.method} ${r.path} ${JSON.stringify(r.query)}`)).toEqual([
          'GET /v1/tasks {"project_id":"prj_1"}',
          'GET /v1/tasks {"project_id":"prj_1"}',
        ]);
      });

      it('shows a delay as its duration, a check evaluated now, and one request per forEach item', async () => {
        const env = { SERVICE_API_URL: sim.url, SERVICE_API_KEY: 'ac_test_rules_test_spec' };
        const inProject = [...sim.state.tasks.values()].filter((task) => task.project_id === 'prj_1');
        inProject.forEach((task, i) => (task.status = i === 0 ? 'completed' : 'open'));
        const open = inProject.slice(1);
        const { code, out } = await runTest([`${RULES}/time-and-sets.json`, '--event', `${EVENTS}/task-completed.json`], { env });
        expect(code).toBe(0);
        expect(out.slice(out.indexOf('actions (the requests they would send; nothing was sent)'))).toEqual([
          'actions (the requests they would send; nothing was sent)',
          '  ⏸ 1. delay: waits PT72H',
          '  ✓ 2. check: passes now',
          expect.stringMatching(/^ {6}✓ all\[0\] {2}tasks \{"project_id":"\{\{ event.data.task.project_id \}\}"\} \$\[\?\(@.status != 'completed'\)\] isNotEmpty true/),
          `  → 3. task.update: for each of ${open.length} item${open.length === 1 ? '' : 's'}`,
          ...open.flatMap((task, index) => [
            `      → [${index}]: PATCH /v1/tasks/${task.id}`,
            `          {"priority":"high","description":"${index}: escalated in Website relaunch"}`,
          ]),
          `✓ match: escalate-open-tasks on evt_cli_release: 1 condition passed, ${open.length} request${open.length === 1 ? '' : 's'} would be sent`,
        ]);
        expect(sim.requests.every((request) => request.method === 'GET')).toBe(true);
      });

      it('shows too_many_items past MAX_FOREACH_ITEMS, and refuses a MAX_FOREACH_ITEMS the engine would refuse', async () => {
        const env = { SERVICE_API_URL: sim.url, SERVICE_API_KEY: 'ac_test_rules_test_spec' };
        const args = [`${RULES}/time-and-sets.json`, '--event', `${EVENTS}/task-completed.json`];
        sim.state.tasks.forEach((task) => task.project_id === 'prj_1' && (task.status = 'open'));
        const open = [...sim.state.tasks.values()].filter((task) => task.project_id === 'prj_1').length;
        const { out } = await runTest(args, { env: { ...env, MAX_FOREACH_ITEMS: String(open - 1) } });
        expect(out).toContain(`  ✗ 3. task.update: too_many_items: forEach: ${open} items, more than MAX_FOREACH_ITEMS (${open - 1})`);
        expect(out.at(-1)).toBe('✓ match: escalate-open-tasks on evt_cli_release: 1 condition passed, 0 requests would be sent, 1 action would fail');
        const refused = await runTest(args, { env: { ...env, MAX_FOREACH_ITEMS: 'many' } });
        expect(refused.code).toBe(2);
        expect(refused.err.join('\n')).toContain('MAX_FOREACH_ITEMS: must be a whole number, got "many"');
      });

      it('says when a check would stop the execution now', async () => {
        const env = { SERVICE_API_URL: sim.url, SERVICE_API_KEY: 'ac_test_rules_test_spec' };
        for (const task of sim.state.tasks.values()) if (task.project_id === 'prj_1') task.status = 'completed';
        const { out } = await runTest([`${RULES}/time-and-sets.json`, '--event', `${EVENTS}/task-completed.json`], { env });
        expect(out).toContain('  ✗ 2. check: does not pass now: the execution would stop here');
        expect(out).toContain('  (the action after it would not run)');
        expect(out.at(-1)).toBe('✓ match: escalate-open-tasks on evt_cli_release: 1 condition passed, 0 requests would be sent, a check would stop it now');
      });
    });
  });

  describe('choosing the rule', () => {
    it('asks for --rule when the file holds several rules', async () => {
      const { code, out, err } = await runTest([`${RULES}/several.json`, '--event', `${EVENTS}/project-created.json`]);
      expect({ code, out }).toEqual({ code: 2, out: [] });
      expect(err).toEqual([`rules:test: ${RULES}/several.json holds 2 rules (welcome-owner, broken-template): choose one with --rule ID`]);
    });

    it('names the rules the file holds when --rule names another', async () => {
      const { code, err } = await runTest([`${RULES}/several.json`, '--rule', 'nope', '--event', `${EVENTS}/project-created.json`]);
      expect(code).toBe(2);
      expect(err).toEqual([`rules:test: no rule "nope" in ${RULES}/several.json (it holds: welcome-owner, broken-template)`]);
    });
  });

  describe('an invalid rule file', () => {
    it('exits 1 with one file: json-path: message line per problem', async () => {
      const { code, out } = await runTest([`${RULES}/invalid.json`, '--event', `${EVENTS}/task-completed.json`]);
      expect(code).toBe(1);
      expect(out).toEqual([
        expect.stringMatching(/^test\/fixtures\/cli\/rules-test\/invalid\.json: \$\.actions\[0\]\.type: must be one of .*\(did you mean "task\.create"\?\)$/),
        `${RULES}/invalid.json is invalid (1 problem): nothing was tested`,
      ]);
    });

    it('prints the problems as JSON with --json', async () => {
      const { code, out } = await runTest([`${RULES}/invalid.json`, '--event', `${EVENTS}/task-completed.json`, '--json']);
      expect(code).toBe(1);
      expect(JSON.parse(out.join('\n'))).toEqual({
        problems: [{ file: `${RULES}/invalid.json`, path: '$.actions[0].type', message: expect.stringContaining('must be one of') }],
      });
    });
  });

  describe('expectations for CI', () => {
    it.each([
      ['--expect-match', 'task-completed.json', 0, '✓ as expected (--expect-match)'],
      ['--expect-match', 'task-completed-other.json', 1, '✗ not as expected: --expect-match, but the rule did not match'],
      ['--expect-no-match', 'task-completed-other.json', 0, '✓ as expected (--expect-no-match)'],
      ['--expect-no-match', 'task-completed.json', 1, '✗ not as expected: --expect-no-match, but the rule matched'],
      ['--expect-match', 'project-created.json', 1, '✗ not as expected: --expect-match, but the rule did not match'],
    ])('%s with %s exits %i', async (flag, event, exitCode, line) => {
      const { code, out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/${event}`, flag]);
      expect(code).toBe(exitCode);
      expect(out.at(-1)).toBe(line);
    });
  });

  describe('--json', () => {
    it('prints the raw result', async () => {
      const { code, out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed.json`, '--json']);
      expect(code).toBe(0);
      const result = JSON.parse(out.join('\n'));
      expect(result).toMatchObject({ rule: 'release-follow-up', enabled: true, listens: true, matched: true });
      expect(result.conditions).toHaveLength(4);
      expect(result.actions[0]).toEqual({
        id: 'review',
        type: 'task.create',
        request: {
          operation: 'tasks.create', method: 'POST', path: '/tasks', body: { project_id: 'prj_1', title: 'Review: Release 1.0', assignee_id: 'usr_2' },
          createsIn: { kind: 'task', parent: 'project:prj_1' },
        },
      });
    });
  });

  describe('usage errors and unreadable files', () => {
    it.each([
      [[`${RULES}/release-follow-up.json`], '--event EVENT_FILE is required'],
      [['--event', `${EVENTS}/task-completed.json`], 'RULE_FILE is required'],
      [['a.json', 'b.json', '--event', 'e.json'], 'expected one RULE_FILE, got 2'],
      [['a.json', '--event'], '--event needs a value'],
      [['a.json', '--event', 'e.json', '--strict'], 'unknown option --strict'],
      [['a.json', '--event', 'e.json', '--json=yes'], '--json takes no value'],
      [['a.json', '--event', 'e.json', '--now', 'tuesday'], '--now must be an ISO-8601 date-time, got "tuesday"'],
      [['a.json', '--event', 'e.json', '--expect-match', '--expect-no-match'], '--expect-match and --expect-no-match exclude each other'],
    ])('exits 2 with the usage for %j', async (args, message) => {
      const { code, out, err } = await runTest(args);
      expect({ code, out }).toEqual({ code: 2, out: [] });
      expect(err).toEqual([`rules:test: ${message}`, USAGE]);
    });

    it.each([
      [`${RULES}/release-follow-up.json`, `${EVENTS}/missing.json`, `event file not found: ${EVENTS}/missing.json`],
      [`${RULES}/release-follow-up.json`, `${EVENTS}/not-json.json`, `${EVENTS}/not-json.json is not a valid event: body is not valid JSON: `],
      [`${RULES}/release-follow-up.json`, `${EVENTS}/no-type.json`, `${EVENTS}/no-type.json is not a valid event: event.type is required and must be a non-empty string`],
      [`${RULES}/missing.json`, `${EVENTS}/task-completed.json`, `rule file not found: ${RULES}/missing.json`],
      [RULES, `${EVENTS}/task-completed.json`, `${RULES} is not a file`],
    ])('exits 2 for rule file %s and event file %s', async (rule, event, message) => {
      const { code, out, err } = await runTest([rule, '--event', event]);
      expect({ code, out }).toEqual({ code: 2, out: [] });
      expect(err).toHaveLength(1);
      expect(err[0].startsWith(`rules:test: ${message}`)).toBe(true);
    });

    it('prints the usage and exits 0 for --help', async () => {
      const { code, out } = await runTest(['--help']);
      expect({ code, out }).toEqual({ code: 0, out: [USAGE] });
      expect(parseArgs(['-h'])).toEqual({ help: true });
    });
  });

  describe('colours', () => {
    it('colours marks and the summary on a terminal', async () => {
      const { out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed.json`], { color: true });
      expect(out[4]).toMatch(/^ {2}\u001b\[32m✓\u001b\[39m /);
      expect(out.at(-1)).toBe('\u001b[32m✓ match: release-follow-up on evt_cli_release: 3 conditions passed, 2 requests would be sent\u001b[39m');
    });

    it('writes plain text otherwise', async () => {
      const { out } = await runTest([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed.json`]);
      expect(out.join('\n')).not.toContain('\u001b');
    });
  });

  describe('the built command', () => {
    function runBuilt(args: string[]) {
      if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: build first (npx nest build; npm test does it)`);
      return spawnSync(process.execPath, [BUILT, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
    }

    it('runs as a program: plain text when not on a terminal, exit 0', () => {
      const child = runBuilt([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed.json`]);
      expect({ status: child.status, stderr: child.stderr }).toEqual({ status: 0, stderr: '' });
      expect(child.stdout).not.toContain('\u001b');
      expect(child.stdout.trimEnd().split('\n').at(-1)).toBe('✓ match: release-follow-up on evt_cli_release: 3 conditions passed, 2 requests would be sent');
    });

    it('exits 1 when --expect-match is not met and 2 on a usage error', () => {
      expect(runBuilt([`${RULES}/release-follow-up.json`, '--event', `${EVENTS}/task-completed-other.json`, '--expect-match']).status).toBe(1);
      const usage = runBuilt([`${RULES}/release-follow-up.json`]);
      expect(usage.status).toBe(2);
      expect(usage.stderr).toBe(`rules:test: --event EVENT_FILE is required\n${USAGE}\n`);
    });
  });
});
