import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from 'json-rules-engine';
import { addExtraOperators } from './operators.js';
import { loadRuleFiles, loadRulePath, parseRuleFile, ruleFilesChanged, ruleVersion, toLoadedRule } from './rule-files.js';
import type { RuleDefinition } from './rule.types.js';

const FIXTURES = 'test/fixtures/rules';

function aRule(overrides: Partial<RuleDefinition> = {}): RuleDefinition {
  return {
    id: 'a-rule',
    on: 'task.completed',
    actions: [{ type: 'project.archive', params: { id: 'prj_1' } }],
    ...overrides,
  };
}

/** A throwaway rules folder: `{ 'a/b.json': content }`, content as JSON or raw text. */
async function rulesFolder(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rules-'));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true });
    await writeFile(join(dir, path), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
}

const folders: string[] = [];
afterAll(() => Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true }))));

async function loadFolder(files: Record<string, unknown>) {
  const dir = await rulesFolder(files);
  folders.push(dir);
  return { dir, ...(await loadRuleFiles(dir)) };
}

describe(loadRuleFiles.name, () => {
  describe('a folder of valid files', () => {
    it('loads nested folders and array files in path order', async () => {
      const { rules, problems, files } = await loadRuleFiles(`${FIXTURES}/valid`);
      expect(problems).toEqual([]);
      expect(files).toEqual([`${FIXTURES}/valid/nested/array-of-rules.json`, `${FIXTURES}/valid/single-rule.json`]);
      expect(rules.map((rule) => [rule.id, rule.source])).toEqual([
        ['fixture-array-first', { kind: 'file', path: 'nested/array-of-rules.json' }],
        ['fixture-array-second', { kind: 'file', path: 'nested/array-of-rules.json' }],
        ['fixture-single', { kind: 'file', path: 'single-rule.json' }],
      ]);
    });

    it('skips rule.schema.json, dot-folders, node_modules and files that are not JSON', async () => {
      const { rules, problems } = await loadFolder({
        'kept.json': aRule({ id: 'kept' }),
        'rule.schema.json': { type: 'object' },
        '.git/x.json': 'not json',
        'node_modules/pkg/package.json': { name: 'pkg' },
        'README.md': '# notes',
      });
      expect(problems).toEqual([]);
      expect(rules.map((rule) => rule.id)).toEqual(['kept']);
    });

    it('returns nothing for an empty folder', async () => {
      expect(await loadFolder({})).toMatchObject({ rules: [], problems: [], files: [] });
    });
  });

  describe('invalid files', () => {
    it('reports broken JSON at $ with the parse error and where it is', async () => {
      const { problems } = await loadRuleFiles(`${FIXTURES}/mixed`);
      const broken = problems.filter((problem) => problem.file.endsWith('b-broken-json.json'));
      expect(broken).toEqual([{ file: `${FIXTURES}/mixed/b-broken-json.json`, path: '$', message: expect.stringMatching(/^invalid JSON: .+/) }]);
      expect(broken[0].message).not.toContain('\n');
    });

    it('gives the line and column when the parser names a position', async () => {
      const { problems } = await loadFolder({ 'a.json': '{\n  "id": "x",\n  "on": 1 2\n}' });
      expect(problems[0].message).toMatch(/\(line 3, column 11\)$/);
    });

    it('still loads the good rules next to bad ones, even in the same array file', async () => {
      const { rules, problems } = await loadRuleFiles(`${FIXTURES}/mixed`);
      expect(rules.map((rule) => rule.id)).toEqual(['good-one', 'array-good']);
      expect(problems.map((problem) => [problem.file.slice(FIXTURES.length + 7), problem.path])).toEqual([
        ['b-broken-json.json', '$'],
        ['c-array.json', '$[1].actions[0].type'],
        ['d-duplicate.json', '$.id'],
        ['sub/e-unknown-property.json', '$.condtions'],
      ]);
    });

    it('keeps the first of two rules with the same id and reports the later file', async () => {
      const { rules, problems } = await loadFolder({
        'b/second.json': [aRule({ id: 'other' }), aRule({ id: 'same', name: 'second' })],
        'a/first.json': aRule({ id: 'same', name: 'first' }),
      });
      expect(rules.map((rule) => [rule.id, rule.definition.name ?? null])).toEqual([['same', 'first'], ['other', null]]);
      expect(problems).toEqual([
        { file: expect.stringMatching(/b\/second\.json$/), path: '$[1].id', message: expect.stringMatching(/^duplicate rule id "same": already defined in .*a\/first\.json$/) },
      ]);
    });

    it('names files inside the working directory relative to it', async () => {
      const { problems } = await loadRuleFiles(`./${FIXTURES}/mixed`);
      expect(problems[0].file).toBe(`${FIXTURES}/mixed/b-broken-json.json`);
    });

    it('rejects when the folder does not exist', async () => {
      await expect(loadRuleFiles(`${FIXTURES}/missing`)).rejects.toThrow(/ENOENT/);
    });
  });

  describe('the example rules in rules/', () => {
    it('are all valid, with distinct ids, and name the schema', async () => {
      const { rules, problems, files } = await loadRuleFiles('rules');
      expect(problems).toEqual([]);
      expect(files.length).toBeGreaterThanOrEqual(5);
      expect(rules).toHaveLength(files.length);
      expect(rules.every((rule) => rule.definition.$schema === './rule.schema.json')).toBe(true);
    });

    /** Evaluates an example's conditions with json-rules-engine and the engine's extra operators. */
    async function fires(file: string, facts: Record<string, unknown>): Promise<boolean> {
      const { rules } = await loadRulePath(`rules/${file}`);
      const engine = addExtraOperators(new Engine([], { allowUndefinedFacts: true }));
      engine.addRule({ conditions: rules[0].definition.conditions!, event: { type: 'fire' } });
      for (const [name, value] of Object.entries(facts)) engine.addFact(name, () => value);
      return (await engine.run()).events.length === 1;
    }

    it('archive-finished-project fires only when no task of the project is left open', async () => {
      const done = { id: 't1', status: 'completed' };
      expect(await fires('archive-finished-project.json', { tasks: [done, { ...done, id: 't2' }] })).toBe(true);
      expect(await fires('archive-finished-project.json', { tasks: [] })).toBe(true);
      expect(await fires('archive-finished-project.json', { tasks: [done, { id: 't2', status: 'open' }] })).toBe(false);
    });

    it('escalate-on-status-change fires only when the status becomes blocked', async () => {
      const change = (to: string) => ({ changes: { status: { from: 'open', to }, title: { from: 'a', to: 'b' } } });
      expect(await fires('escalate-on-status-change.json', change('blocked'))).toBe(true);
      expect(await fires('escalate-on-status-change.json', change('completed'))).toBe(false);
      expect(await fires('escalate-on-status-change.json', { changes: {} })).toBe(false);
    });

    it('welcome-project-owner fires only when the project names an owner email', async () => {
      const project = (owner_email?: string) => ({ event: { type: 'project.created', data: { project: { id: 'prj_1', owner_email } } } });
      expect(await fires('welcome-project-owner.json', project('owner@example.com'))).toBe(true);
      expect(await fires('welcome-project-owner.json', project(''))).toBe(false);
      expect(await fires('welcome-project-owner.json', project())).toBe(false);
    });

    it('notify-on-release-completion fires only for release tasks', async () => {
      const task = (title: string) => ({ event: { type: 'task.completed', data: { task: { id: 't1', title } } } });
      expect(await fires('notify-on-release-completion.json', task('Release 2.0'))).toBe(true);
      expect(await fires('notify-on-release-completion.json', task('Prepare Release 2.0'))).toBe(false);
    });
  });
});

describe(ruleFilesChanged.name, () => {
  const files = { 'a.json': aRule({ id: 'a' }), 'team/b.json': aRule({ id: 'b' }), 'notes.txt': 'not a rule file' };

  it('finds nothing changed in a folder as it was read, and stamps every file read', async () => {
    const read = await loadFolder(files);
    expect(read.stamps).toEqual([expect.stringMatching(/^[\d.]+:\d+$/), expect.stringMatching(/^[\d.]+:\d+$/)]);
    expect(await ruleFilesChanged(read.dir, read)).toBe(false);
  });

  it.each([
    ['a file rewritten with another size', (dir: string) => writeFile(join(dir, 'a.json'), JSON.stringify(aRule({ id: 'a', name: 'longer' })))],
    ['a file given another modification time only', (dir: string) => utimes(join(dir, 'team/b.json'), new Date(0), new Date(0))],
    ['a file added, in a nested folder', (dir: string) => writeFile(join(dir, 'team/c.json'), JSON.stringify(aRule({ id: 'c' })))],
    ['a file removed', (dir: string) => rm(join(dir, 'a.json'))],
  ])('finds %s', async (_, change) => {
    const read = await loadFolder(files);
    await change(read.dir);
    expect(await ruleFilesChanged(read.dir, read)).toBe(true);
  });

  it('does not count a change to a file that is not a rule file', async () => {
    const read = await loadFolder(files);
    await writeFile(join(read.dir, 'notes.txt'), 'changed, and longer than before');
    expect(await ruleFilesChanged(read.dir, read)).toBe(false);
  });
});

describe(loadRulePath.name, () => {
  it('loads a single file, its source being the file name', async () => {
    const { rules, files } = await loadRulePath(`${FIXTURES}/valid/single-rule.json`);
    expect(files).toEqual([`${FIXTURES}/valid/single-rule.json`]);
    expect(rules.map((rule) => rule.source)).toEqual([{ kind: 'file', path: 'single-rule.json' }]);
  });

  it('loads a folder like loadRuleFiles', async () => {
    expect((await loadRulePath(`${FIXTURES}/valid`)).rules).toHaveLength(3);
  });

  it('rejects a path that does not exist', async () => {
    await expect(loadRulePath(`${FIXTURES}/nope.json`)).rejects.toThrow(/ENOENT/);
  });
});

describe(parseRuleFile.name, () => {
  it('treats an empty array as a file without rules', () => {
    expect(parseRuleFile('[]', 'x.json')).toEqual({ rules: [], problems: [] });
  });

  it('accepts a byte order mark', () => {
    expect(parseRuleFile(`\uFEFF${JSON.stringify(aRule())}`, 'x.json').problems).toEqual([]);
  });
});

describe(toLoadedRule.name, () => {
  it('fills in the defaults and lists the triggers', () => {
    const loaded = toLoadedRule(aRule(), { kind: 'api' });
    expect(loaded).toMatchObject({ id: 'a-rule', priority: 1, enabled: true, triggers: ['task.completed'], source: { kind: 'api' } });
  });

  it('keeps priority, enabled and a list of triggers as written', () => {
    const loaded = toLoadedRule(aRule({ on: ['task.*', 'project.created'], priority: 7, enabled: false }), { kind: 'api' });
    expect(loaded).toMatchObject({ priority: 7, enabled: false, triggers: ['task.*', 'project.created'] });
  });

  it('listens to schedule.fired for a cron rule', () => {
    const loaded = toLoadedRule(aRule({ on: undefined, schedule: { cron: '0 9 * * *' } }), { kind: 'api' });
    expect(loaded.triggers).toEqual(['schedule.fired']);
  });
});

describe(ruleVersion.name, () => {
  it('is 16 hex characters that ignore key order', () => {
    const a = ruleVersion(aRule({ name: 'n', priority: 2 }));
    const b = ruleVersion({ priority: 2, name: 'n', ...aRule() } as RuleDefinition);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(b).toBe(a);
  });

  it('changes when anything in the definition changes', () => {
    expect(ruleVersion(aRule({ priority: 3 }))).not.toBe(ruleVersion(aRule({ priority: 4 })));
  });
});
