import { jsonPath, readRuleSchema, RULE_SCHEMA_PATH, ruleSchemaProblems, schemaProblems } from './rule-schema.js';

const FILE = 'rules/example.json';

function aRule(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'a-rule',
    on: 'task.completed',
    actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review' } }],
    ...overrides,
  };
}

function problemsAt(json: unknown): Array<[string, string]> {
  return schemaProblems(json, FILE).map((problem) => [problem.path, problem.message]);
}

describe(schemaProblems.name, () => {
  describe('valid files', () => {
    it('accepts the rule from the SPEC', () => {
      const rule = aRule({
        name: 'Follow-up review',
        enabled: true,
        priority: 10,
        on: ['task.completed'],
        conditions: {
          all: [
            { fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' },
            { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release' },
          ],
        },
        actions: [
          { id: 'review', type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'x' } },
          { type: 'workflow.trigger', params: { id: 'wf_notify', input: { task_id: '{{ actions.review.response.id }}' } } },
        ],
        options: { allowSelfTriggered: false, throttle: { limit: 1, windowSeconds: 3600, key: '{{ event.id }}' } },
      });
      expect(schemaProblems(rule, FILE)).toEqual([]);
    });

    it('accepts an array of rules, a schedule and a $schema reference', () => {
      const scheduled = aRule({ id: 'daily', on: undefined, schedule: { cron: '0 9 * * *', timezone: 'UTC' } });
      expect(schemaProblems([aRule({ $schema: './rule.schema.json' }), JSON.parse(JSON.stringify(scheduled))], FILE)).toEqual([]);
    });
  });

  describe('action types', () => {
    it('names the allowed types at the exact path of a misspelt one', () => {
      const rule = aRule({ actions: [{ type: 'task.craete', params: { project_id: 'prj_1' } }] });
      const problems = schemaProblems(rule, FILE);
      expect(problems).toHaveLength(1);
      expect(problems[0].file).toBe(FILE);
      expect(problems[0].path).toBe('$.actions[0].type');
      expect(problems[0].message).toBe(
        'must be one of task.create, task.update, task.delete, user.invite, user.remove, project.create, project.update, ' +
          'project.archive, workflow.trigger, delay, check (did you mean "task.create"?)',
      );
    });

    it('requires project_id for task.create, as the one problem at params.project_id', () => {
      const rule = aRule({ actions: [{ type: 'task.create', params: { title: 'x' } }] });
      expect(problemsAt(rule)).toEqual([['$.actions[0].params.project_id', 'is required']]);
    });

    it.each([
      ['task.update', 'id'],
      ['task.delete', 'id'],
      ['user.remove', 'id'],
      ['project.update', 'id'],
      ['project.archive', 'id'],
      ['workflow.trigger', 'id'],
      ['user.invite', 'email'],
    ])('requires %s params to have %s', (type, param) => {
      const rule = aRule({ actions: [{ type, params: {} }] });
      expect(problemsAt(rule)).toEqual([[`$.actions[0].params.${param}`, 'is required']]);
    });

    it('accepts project.create with any body', () => {
      expect(problemsAt(aRule({ actions: [{ type: 'project.create', params: { name: 'New' } }] }))).toEqual([]);
    });

    it('rejects an empty action list', () => {
      expect(problemsAt(aRule({ actions: [] }))).toEqual([['$.actions', 'must not be empty']]);
    });

    it('rejects an action id that cannot be used in a template', () => {
      const rule = aRule({ actions: [{ id: 'my review', type: 'project.create', params: {} }] });
      expect(problemsAt(rule).map(([path]) => path)).toEqual(['$.actions[0].id']);
    });
  });

  describe('unknown properties', () => {
    it('reports a misspelt property where it is written, with a suggestion', () => {
      const rule = aRule({ condtions: { all: [] } });
      expect(problemsAt(rule)).toEqual([['$.condtions', 'unknown property "condtions" (did you mean "conditions"?)']]);
    });

    it('reports unknown properties inside options.throttle', () => {
      const rule = aRule({ options: { throttle: { limit: 1, windowSeconds: 60, per: 'x' } } });
      expect(problemsAt(rule)).toEqual([['$.options.throttle.per', 'unknown property "per"']]);
    });
  });

  describe('triggers', () => {
    it('rejects a rule with both on and schedule', () => {
      const rule = aRule({ schedule: { cron: '* * * * *' } });
      expect(problemsAt(rule)).toEqual([['$', 'must have only one of "on", "schedule"']]);
    });

    it('rejects a rule with neither on nor schedule', () => {
      expect(problemsAt(aRule({ on: undefined }))).toEqual([['$', 'must have one of "on", "schedule"']]);
    });

    it.each([['task.completed'], ['task.*'], ['*'], ['workflow.run.completed']])('accepts the event pattern %s', (on) => {
      expect(problemsAt(aRule({ on }))).toEqual([]);
    });

    it('rejects a malformed event pattern inside a list', () => {
      expect(problemsAt(aRule({ on: ['task.completed', 'task..x'] })).map(([path]) => path)).toEqual(['$.on[1]']);
    });

    it('rejects an on that is neither a string nor a list', () => {
      expect(problemsAt(aRule({ on: 5 }))).toEqual([['$.on', 'must be string or array']]);
    });
  });

  describe('rule fields', () => {
    it.each([['Has-Capitals'], ['-leading-dash'], ['x'.repeat(101)], ['']])('rejects the id %j', (id) => {
      const problems = problemsAt(aRule({ id }));
      expect(problems).toHaveLength(1);
      expect(problems[0][0]).toBe('$.id');
      expect(problems[0][1]).toMatch(/^must match pattern/);
    });

    it('requires an id', () => {
      expect(problemsAt(aRule({ id: undefined }))).toEqual([['$.id', 'is required']]);
    });

    it('requires priority to be an integer of at least 1', () => {
      expect(problemsAt(aRule({ priority: 0 }))).toEqual([['$.priority', 'must be >= 1']]);
      expect(problemsAt(aRule({ priority: 1.5 }))).toEqual([['$.priority', 'must be integer']]);
    });

    it('rejects a throttle limit below 1', () => {
      const rule = aRule({ options: { throttle: { limit: 0, windowSeconds: 60 } } });
      expect(problemsAt(rule)).toEqual([['$.options.throttle.limit', 'must be >= 1']]);
    });
  });

  describe('conditions', () => {
    it('asks for one of all, any, not at the top', () => {
      expect(problemsAt(aRule({ conditions: {} }))).toEqual([['$.conditions', 'must have one of "all", "any", "not"']]);
    });

    it('rejects a group with two boolean operators', () => {
      const conditions = { all: [], any: [] };
      expect(problemsAt(aRule({ conditions }))).toEqual([['$.conditions', 'must have only one of "all", "any", "not"']]);
    });

    it('reports a broken leaf deep in nested groups at its path', () => {
      const conditions = { all: [{ any: [{ not: { fact: 'event', operator: 'equal' } }] }] };
      expect(problemsAt(aRule({ conditions }))).toEqual([
        ['$.conditions.all[0].any[0].not.value', 'is required'],
      ]);
    });

    it('rejects an unknown operator with the list of known ones', () => {
      const conditions = { all: [{ fact: 'event', operator: 'equals', value: 1 }] };
      const [problem] = schemaProblems(aRule({ conditions }), FILE);
      expect(problem.path).toBe('$.conditions.all[0].operator');
      expect(problem.message).toMatch(/^must be one of equal, notEqual, .*matches, startsWith, endsWith, isEmpty, isNotEmpty \(did you mean "equal"\?\)$/);
    });

    it('requires a string pattern for matches', () => {
      const conditions = { any: [{ fact: 'event', operator: 'matches', value: 42 }] };
      expect(problemsAt(aRule({ conditions }))).toEqual([['$.conditions.any[0].value', 'must be string or object']]);
    });

    it('requires a JSONPath starting with $', () => {
      const conditions = { all: [{ fact: 'event', path: 'data.task.id', operator: 'equal', value: 1 }] };
      expect(problemsAt(aRule({ conditions })).map(([path]) => path)).toEqual(['$.conditions.all[0].path']);
    });
  });

  describe('array files', () => {
    it('prefixes each problem with the index of its rule', () => {
      const file = [aRule(), aRule({ id: 'second', actions: [{ type: 'task.remove', params: {} }] })];
      expect(problemsAt(file).map(([path]) => path)).toEqual(['$[1].actions[0].type']);
    });

    it('reports a file that is neither a rule nor an array', () => {
      expect(problemsAt('rules')).toEqual([['$', 'must be object']]);
    });
  });
});

describe(ruleSchemaProblems.name, () => {
  it('validates one rule of an array file, naming its index', () => {
    const problems = ruleSchemaProblems(aRule({ priority: 'high' }), FILE, 3);
    expect(problems).toEqual([{ file: FILE, path: '$[3].priority', message: 'must be integer' }]);
  });

  it('rejects an array where one rule is expected', () => {
    expect(ruleSchemaProblems([aRule()], FILE).map((problem) => problem.message)).toEqual(['must be object']);
  });
});

describe(readRuleSchema.name, () => {
  it('reads the schema the rule files name', () => {
    expect(readRuleSchema(RULE_SCHEMA_PATH)).toMatchObject({ definitions: { rule: expect.any(Object) } });
  });

  it('says that a missing schema is an incomplete installation, with no code a caller would take for its own path', () => {
    const missing = `${RULE_SCHEMA_PATH}.missing`;
    let thrown: (Error & { code?: string }) | undefined;
    try {
      readRuleSchema(missing);
    } catch (error) {
      thrown = error as Error & { code?: string };
    }
    expect(thrown?.message).toBe(`the rule schema ${missing} cannot be read (ENOENT: no such file or directory, open '${missing}'): the engine's installation is incomplete`);
    expect(thrown?.code).toBeUndefined();
  });
});

describe(jsonPath.name, () => {
  it('writes identifiers with dots, indexes in brackets and odd keys quoted', () => {
    expect(jsonPath(['actions', 0, 'params', 'odd key', 'x-y'], 2)).toBe('$[2].actions[0].params["odd key"].x-y');
    expect(jsonPath([])).toBe('$');
  });
});
