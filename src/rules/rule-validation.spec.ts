import { validateRule } from './rule-validation.js';

const FILE = 'rules/example.json';

function aRule(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'a-rule',
    on: 'task.completed',
    actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Review' } }],
    ...overrides,
  };
}

function withActions(...actions: Array<Record<string, unknown>>): Record<string, unknown> {
  return aRule({ actions });
}

function problemsAt(json: unknown): Array<[string, string]> {
  return validateRule(json, FILE).map((problem) => [problem.path, problem.message]);
}

describe(validateRule.name, () => {
  describe('a valid rule', () => {
    it('has no problems, templates and chaining included', () => {
      const rule = withActions(
        { id: 'review', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: '{{ event.data.task.title | upcase }}' } },
        { type: 'workflow.trigger', params: { id: 'wf_notify', input: { task_id: '{{ actions.review.response.id }}', rule: '{{ rule.id }}', at: '{{ now.iso }}' } } },
      );
      expect(validateRule(rule, FILE)).toEqual([]);
    });

    it('allows variables the template defines itself', () => {
      const rule = withActions({
        type: 'project.create',
        params: { name: '{% assign t = event.data.task %}{{ t.title }}{% for tag in event.data.task.tags %}{{ tag }}{% endfor %}' },
      });
      expect(validateRule(rule, FILE)).toEqual([]);
    });
  });

  describe('schema first', () => {
    it('returns only the schema problems of a structurally invalid rule', () => {
      const rule = aRule({ priority: 0, schedule: { cron: 'not cron' }, on: undefined });
      expect(problemsAt(rule)).toEqual([['$.priority', 'must be >= 1']]);
    });

    it('prefixes paths with the index of a rule in an array file', () => {
      const rule = withActions({ type: 'task.create', params: { project_id: '{{ event.id' } });
      expect(validateRule(rule, FILE, 4).map((problem) => problem.path)).toEqual(['$[4].actions[0].params.project_id']);
    });
  });

  describe('templates', () => {
    it('reports a template that does not parse, with the Liquid error', () => {
      const rule = withActions({ type: 'task.create', params: { project_id: 'prj_1', title: 'Review: {{ event.data.task.title }' } });
      const problems = problemsAt(rule);
      expect(problems).toHaveLength(1);
      expect(problems[0][0]).toBe('$.actions[0].params.title');
      expect(problems[0][1]).toMatch(/^invalid template: output "\{\{ event\.data\.task\.title }" not closed/);
    });

    it('reports an unknown filter, as the renderer would', () => {
      const rule = withActions({ type: 'task.create', params: { project_id: '{{ event.data.task.project_id | shout }}' } });
      expect(problemsAt(rule)).toEqual([['$.actions[0].params.project_id', expect.stringMatching(/^invalid template: .*shout/)]]);
    });

    it('finds templates nested in arrays and objects', () => {
      const rule = withActions({ type: 'workflow.trigger', params: { id: 'wf_1', input: { tags: ['ok', '{% if %}'] } } });
      expect(problemsAt(rule).map(([path]) => path)).toEqual(['$.actions[0].params.input.tags[1]']);
    });

    it('reports a variable outside the template context', () => {
      const rule = withActions({ type: 'task.create', params: { project_id: '{{ evnt.data.task.project_id }}' } });
      expect(problemsAt(rule)).toEqual([
        ['$.actions[0].params.project_id', 'unknown variable "evnt"; templates can use event, rule, now, actions'],
      ]);
    });

    it('checks condition params and the throttle key, where actions are not available', () => {
      const rule = aRule({
        conditions: { all: [{ fact: 'project', params: { id: '{{ event.data.task.project_id' }, operator: 'isNotEmpty', value: true }] },
        options: { throttle: { limit: 1, windowSeconds: 60, key: '{{ actions.x.response.id }}' } },
      });
      const problems = problemsAt(rule);
      expect(problems.map(([path]) => path)).toEqual(['$.conditions.all[0].params.id', '$.options.throttle.key']);
      expect(problems[1][1]).toBe('"actions" can only be used in action params');
    });
  });

  describe('action references', () => {
    it('rejects a reference to an action that runs later', () => {
      const rule = withActions(
        { type: 'workflow.trigger', params: { id: 'wf_1', input: { task: '{{ actions.review.response.id }}' } } },
        { id: 'review', type: 'task.create', params: { project_id: 'prj_1' } },
      );
      expect(problemsAt(rule)).toEqual([
        ['$.actions[0].params.input.task', `"actions.review" runs later; only earlier actions' responses are available`],
      ]);
    });

    it("rejects a reference to the action's own response", () => {
      const rule = withActions({ id: 'self', type: 'task.create', params: { project_id: '{{ actions.self.response.project_id }}' } });
      expect(problemsAt(rule)).toEqual([
        ['$.actions[0].params.project_id', `"actions.self" is this action; only earlier actions' responses are available`],
      ]);
    });

    it('rejects a reference to an id no action has, listing the earlier ones', () => {
      const rule = withActions(
        { id: 'first', type: 'project.create', params: { name: 'p' } },
        { type: 'task.create', params: { project_id: '{{ actions.frist.response.id }}' } },
      );
      expect(problemsAt(rule)).toEqual([
        ['$.actions[1].params.project_id', '"actions.frist" is not an earlier action (earlier actions: first)'],
      ]);
    });

    it('rejects anything but response on an earlier action', () => {
      const rule = withActions(
        { id: 'first', type: 'project.create', params: { name: 'p' } },
        { type: 'task.create', params: { project_id: '{{ actions.first.status }}' } },
      );
      expect(problemsAt(rule)).toEqual([['$.actions[1].params.project_id', '"actions.first" only has "response"']]);
    });

    it('rejects two actions with the same id', () => {
      const rule = withActions(
        { id: 'twice', type: 'project.create', params: { name: 'a' } },
        { id: 'twice', type: 'project.create', params: { name: 'b' } },
      );
      expect(problemsAt(rule)).toEqual([['$.actions[1].id', 'duplicate action id "twice"']]);
    });
  });

  describe('regular expressions', () => {
    it('reports a matches pattern that does not compile', () => {
      const rule = aRule({ conditions: { any: [{ not: { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^(Release' } }] } });
      expect(problemsAt(rule)).toEqual([['$.conditions.any[0].not.value', expect.stringMatching(/^invalid regular expression: .*Unterminated group/)]]);
    });

    it('does not treat other operators as patterns', () => {
      const rule = aRule({ conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: '(' }] } });
      expect(problemsAt(rule)).toEqual([]);
    });
  });

  describe('schedules', () => {
    function scheduled(schedule: Record<string, unknown>): Record<string, unknown> {
      return aRule({ on: undefined, schedule });
    }

    it.each([['0 9 * * 1-5'], ['*/15 * * * *'], ['0 0 9 * * *'], ['@daily']])('accepts the cron expression %s', (cron) => {
      expect(problemsAt(scheduled({ cron, timezone: 'Europe/Berlin' }))).toEqual([]);
    });

    it('reports a cron field out of range', () => {
      expect(problemsAt(scheduled({ cron: '61 * * * *' }))).toEqual([
        ['$.schedule.cron', 'invalid cron expression: Field value (61) is out of range'],
      ]);
    });

    it('reports a cron expression that is not one', () => {
      expect(problemsAt(scheduled({ cron: 'every day' })).map(([path]) => path)).toEqual(['$.schedule.cron']);
    });

    it('reports a time zone that is not an IANA name', () => {
      expect(problemsAt(scheduled({ cron: '0 9 * * *', timezone: 'Mars/Olympus' }))).toEqual([
        ['$.schedule.timezone', 'unknown time zone "Mars/Olympus"; use an IANA name such as Europe/Berlin'],
      ]);
    });
  });
});
