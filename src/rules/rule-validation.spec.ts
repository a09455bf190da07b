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
        ['$.actions[0].params.project_id', 'unknown variable "evnt"; templates can use event, rule, now, actions, facts'],
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

  describe('time and sets (SPEC 11)', () => {
    const update = { type: 'task.update', params: { id: '{{ event.data.task.id }}', priority: 'high' } };
    const delay = (duration: unknown) => ({ type: 'delay', params: { duration } });
    const openTasks = { fact: 'tasks', params: { project_id: '{{ event.data.project.id }}' }, path: "$[?(@.status != 'completed')]" };
    const perTask = (params: Record<string, unknown>, forEach: unknown = openTasks) => ({ type: 'task.update', forEach, params });

    it('accepts the SLA rule and the archive rule of the issue', () => {
      const sla = aRule({
        on: 'task.created',
        actions: [
          delay('P3D'),
          { type: 'check', conditions: { all: [{ fact: 'event', path: '$.data.task.status', operator: 'notEqual', value: 'completed' }] } },
          update,
          { type: 'workflow.trigger', params: { id: 'wf_escalate', input: { task: '{{ event.data.task.id }}', project: '{{ facts.project.name }}' } } },
        ],
        options: { cancelOn: ['task.completed', 'task.deleted'], debounce: { seconds: 60, key: '{{ event.data.task.id }}' } },
      });
      const archive = aRule({ on: 'project.archived', actions: [perTask({ id: '{{ item.id }}', status: 'completed', note: '{{ index }} of {{ facts.tasks | size }}' })] });
      expect(validateRule(sla, FILE)).toEqual([]);
      expect(validateRule(archive, FILE)).toEqual([]);
    });

    it.each([
      ['a duration a template yields', [delay('PT{{ event.data.minutes }}M'), update], []],
      ['a delay between actions', [update, delay('PT15M'), update], []],
      ['a check with an id', [{ id: 'still_open', type: 'check', conditions: { not: { fact: 'changes', operator: 'isEmpty', value: true } } }, update], []],
      ['a forEach template over an earlier response', [{ id: 'list', ...update }, perTask({ id: '{{ item }}' }, '{{ actions.list.response.ids }}')], []],
      ['a delay in last place', [update, delay('PT15M')], [['$.actions[1]', 'a delay must not be the last entry: nothing would run after it']]],
      ['a delay of years', [delay('P1Y'), update], [['$.actions[0].params.duration', '"P1Y": years and months have no fixed length; write days (P30D) or weeks (P4W)']]],
      ['a delay of zero', [delay('PT0S'), update], [['$.actions[0].params.duration', '"PT0S" must be longer than zero']]],
      ['a delay too long', [delay('P100D'), update], [['$.actions[0].params.duration', '"P100D" is longer than the maximum of 90 days (P90D)']]],
      ['a delay that is not a duration', [delay('3 days'), update], [['$.actions[0].params.duration', '"3 days" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M']]],
      ['a delay without a duration', [{ type: 'delay', params: {} }, update], [['$.actions[0].params.duration', 'is required']]],
      ['a delay with a number', [delay(3600), update], [['$.actions[0].params.duration', 'must be string']]],
      ['a delay template reading a later action', [delay('{{ actions.later.response.wait }}'), { id: 'later', ...update }], [['$.actions[0].params.duration', `"actions.later" runs later; only earlier actions' responses are available`]]],
      ['a check without conditions', [{ type: 'check' }, update], [['$.actions[0].conditions', 'is required']]],
      ['a check with params', [{ type: 'check', params: {}, conditions: { all: [] } }, update], [['$.actions[0].params', 'a check step has no params; its test goes in "conditions"']]],
      ['a check with a bad operator', [{ type: 'check', conditions: { all: [{ fact: 'event', operator: 'eq', value: 1 }] } }, update], [['$.actions[0].conditions.all[0].operator', expect.stringMatching(/^must be one of equal, notEqual/)]]],
      ['a check with a bad pattern', [{ type: 'check', conditions: { any: [{ fact: 'event', path: '$.type', operator: 'matches', value: '(' }] } }, update], [['$.actions[0].conditions.any[0].value', expect.stringMatching(/^invalid regular expression: /)]]],
      ['a check param reading an action', [{ type: 'check', conditions: { all: [{ fact: 'project', params: { id: '{{ actions.a.response.id }}' }, operator: 'isNotEmpty', value: true }] } }, update], [['$.actions[0].conditions.all[0].params.id', '"actions" can only be used in action params']]],
      ['a step named wrongly', [{ type: 'dely', params: {} }, update], [['$.actions[0].type', 'must be one of task.create, task.update, task.delete, user.invite, user.remove, project.create, project.update, project.archive, workflow.trigger, delay, check (did you mean "delay"?)']]],
      ['forEach on a delay', [{ ...delay('PT1M'), forEach: '{{ event.data.items }}' }, update], [['$.actions[0].forEach', 'forEach applies to actions, not to a delay step']]],
      ['forEach on a check', [{ type: 'check', conditions: { all: [] }, forEach: '{{ event.data.items }}' }, update], [['$.actions[0].forEach', 'forEach applies to actions, not to a check step']]],
      ['forEach over an unknown fact', [perTask({ id: '{{ item.id }}' }, { fact: 'taks' })], [['$.actions[0].forEach.fact', 'must be one of tasks, event, changes, project, user (did you mean "tasks"?)']]],
      ['forEach without a fact', [perTask({ id: '{{ item.id }}' }, { path: '$[*]' })], [['$.actions[0].forEach.fact', 'is required']]],
      ['forEach with a path that is not JSONPath', [perTask({ id: '{{ item.id }}' }, { fact: 'tasks', params: { project_id: 'p' }, path: 'status' })], [['$.actions[0].forEach.path', 'must match pattern "^\\$"']]],
      ['forEach as a number', [perTask({ id: '{{ item.id }}' }, 3)], [['$.actions[0].forEach', 'must be object or string']]],
      ['forEach as plain text', [perTask({ id: '{{ item.id }}' }, 'tasks')], [['$.actions[0].forEach', 'must be a fact reference or a template yielding a list, e.g. "{{ event.data.items }}"']]],
      ['forEach template reading item', [perTask({ id: '{{ item.id }}' }, '{{ item.children }}')], [['$.actions[0].forEach', '"item" can only be used in the params of an action with "forEach"']]],
      ['forEach lookup params reading facts', [perTask({ id: '{{ item.id }}' }, { fact: 'tasks', params: { project_id: '{{ facts.project.id }}' } })], [['$.actions[0].forEach.params.project_id', '"facts" can only be used in action params']]],
      ['item outside a forEach action', [{ type: 'task.update', params: { id: '{{ item.id }}' } }], [['$.actions[0].params.id', '"item" can only be used in the params of an action with "forEach"']]],
      ['index outside a forEach action', [{ type: 'task.create', params: { project_id: 'p', title: 'n{{ index }}' } }], [['$.actions[0].params.title', '"index" can only be used in the params of an action with "forEach"']]],
      ['item in a delay', [delay('PT{{ index }}M'), update], [['$.actions[0].params.duration', '"index" can only be used in the params of an action with "forEach"']]],
    ])('%s', (_name, actions, expected) => {
      expect(problemsAt(withActions(...(actions as Array<Record<string, unknown>>)))).toEqual(expected);
    });

    it.each([
      ['cancelOn as one pattern', { cancelOn: 'task.*' }, []],
      ['a malformed cancelOn pattern', { cancelOn: ['task.completed', 'task..deleted'] }, [['$.options.cancelOn[1]', expect.stringMatching(/^must match pattern/)]]],
      ['an empty cancelOn', { cancelOn: [] }, [['$.options.cancelOn', 'must not be empty']]],
      ['cancelOn as a number', { cancelOn: 3 }, [['$.options.cancelOn', 'must be string or array']]],
      ['debounce without key', { debounce: { seconds: 10 } }, [['$.options.debounce.key', 'is required']]],
      ['debounce without seconds', { debounce: { key: '{{ event.data.task.id }}' } }, [['$.options.debounce.seconds', 'is required']]],
      ['debounce of zero seconds', { debounce: { seconds: 0, key: 'k' } }, [['$.options.debounce.seconds', 'must be >= 1']]],
      ['debounce longer than a day', { debounce: { seconds: 86401, key: 'k' } }, [['$.options.debounce.seconds', 'must be <= 86400']]],
      ['debounce of a fraction', { debounce: { seconds: 1.5, key: 'k' } }, [['$.options.debounce.seconds', 'must be integer']]],
      ['an empty debounce key', { debounce: { seconds: 5, key: '' } }, [['$.options.debounce.key', 'must not be empty']]],
      ['a debounce key with a typo', { debounce: { seconds: 5, key: 'k', keys: 'x' } }, [['$.options.debounce.keys', 'unknown property "keys" (did you mean "key"?)']]],
      ['a debounce key that does not parse', { debounce: { seconds: 5, key: '{{ event.id' } }, [['$.options.debounce.key', expect.stringMatching(/^invalid template: /)]]],
      ['a debounce key reading an action', { debounce: { seconds: 5, key: '{{ actions.a.response.id }}' } }, [['$.options.debounce.key', '"actions" can only be used in action params']]],
      ['a debounce key reading item', { debounce: { seconds: 5, key: '{{ item }}' } }, [['$.options.debounce.key', '"item" can only be used in the params of an action with "forEach"']]],
    ])('options: %s', (_name, options, expected) => {
      expect(problemsAt(aRule({ options }))).toEqual(expected);
    });

    it('reports in the file: json-path: message form, with the index of a rule in an array file', () => {
      const problems = validateRule(withActions({ type: 'task.update', params: { id: '{{ item.id }}' } }), FILE, 2);
      expect(problems.map((problem) => `${problem.file}: ${problem.path}: ${problem.message}`)).toEqual([
        'rules/example.json: $[2].actions[0].params.id: "item" can only be used in the params of an action with "forEach"',
      ]);
    });
  });
});
