import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { ApiRuleEntity } from '../database/api-rule.entity.js';
import { DomainError } from '../errors.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, ruleRegistry, type Core } from '../../test/support/core.js';
import { RuleRegistry } from './rule-registry.service.js';
import { formatProblem, type RuleDefinition } from './rule.types.js';

const kinds = await databasesUnderTest('rule registry');

function aDefinition(id: string, overrides: Partial<RuleDefinition> = {}): RuleDefinition {
  return { id, on: 'task.completed', actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: `By ${id}` } }], ...overrides };
}

const BAD_REGEX = { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '(unclosed' };

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${RuleRegistry.name} on $name`, (kind) => {
  let core: Core;
  let registry: RuleRegistry;

  beforeEach(async () => {
    core = await openCore(kind);
    registry = core.registry;
  });

  afterEach(() => core.close());

  const pathOf = (file: string) => join(core.config.rulesDir, file);
  const writeRules = (file: string, content: unknown) =>
    writeFileSync(pathOf(file), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  const listening = (type: string, reg = registry) => reg.index.candidates({ type, data: {} }).evaluate.map((rule) => rule.id);

  /** A registry as an engine started anew on the same database and folder builds it. */
  async function restarted(): Promise<RuleRegistry> {
    const fresh = ruleRegistry(core.config, core.db);
    await fresh.reload();
    return fresh;
  }

  describe('loading the rules folder', () => {
    it('loads every rule of every file, nested folders and array files included, and indexes them', async () => {
      writeRules('a.json', aDefinition('a'));
      mkdirSync(pathOf('team'));
      writeRules('team/b.json', [aDefinition('b1'), aDefinition('b2', { on: 'task.created' })]);
      const report = await registry.reload();

      expect(report.loaded.sort()).toEqual(['a', 'b1', 'b2']);
      expect(registry.ready).toBe(true);
      expect(registry.get('b2')?.source).toEqual({ kind: 'file', path: 'team/b.json' });
      expect(listening('task.completed')).toEqual(['a', 'b1']);
      expect(listening('task.created')).toEqual(['b2']);
    });
  });

  describe('an invalid file', () => {
    it('is reported as `file: json-path: message`, and the valid rules still load', async () => {
      writeRules('good.json', aDefinition('good'));
      writeRules('bad-regex.json', aDefinition('bad-regex', { conditions: { all: [BAD_REGEX] } }));
      writeRules('not-json.json', '{ "id": "not-json",');
      const report = await registry.reload();

      expect(report.loaded).toEqual(['good']);
      expect(registry.problems.map(formatProblem)).toEqual([
        expect.stringMatching(new RegExp(`^${pathOf('bad-regex.json')}: \\$\\.conditions\\.all\\[0\\]\\.value: .*regular expression`)),
        expect.stringMatching(new RegExp(`^${pathOf('not-json.json')}: \\$: invalid JSON: .*\\(line 1, column \\d+\\)$`)),
      ]);
      expect(report.rejected).toEqual(registry.problems);
    });
  });

  describe('a file that changes while the engine runs', () => {
    it('keeps its last good version while it is invalid, and takes the fixed version', async () => {
      writeRules('a.json', aDefinition('a'));
      await registry.reload();
      const good = registry.get('a')!;

      writeRules('a.json', aDefinition('a', { conditions: { all: [BAD_REGEX] } }));
      const broken = await registry.reload();
      expect(broken.kept).toEqual(['a']);
      expect(registry.get('a')?.version).toBe(good.version);
      expect(registry.problemsOf(registry.get('a')!)).toHaveLength(1);
      expect(listening('task.completed')).toEqual(['a']);

      writeRules('a.json', aDefinition('a', { name: 'Fixed' }));
      const fixed = await registry.reload();
      expect(fixed.changed).toEqual(['a']);
      expect(registry.get('a')?.definition.name).toBe('Fixed');
      expect(registry.problemsOf(registry.get('a')!)).toEqual([]);
    });

    it('removes the rules of a file that is deleted', async () => {
      writeRules('a.json', aDefinition('a'));
      await registry.reload();
      rmSync(pathOf('a.json'));

      expect((await registry.reload()).removed).toEqual(['a']);
      expect(registry.get('a')).toBeUndefined();
    });
  });

  describe('rules created through the admin API', () => {
    it('are stored, and a registry started anew on the same database runs them', async () => {
      await core.apiRules.create(aDefinition('from-api'));
      expect(await core.db.manager.countBy(ApiRuleEntity, { ruleId: 'from-api' })).toBe(1);

      const fresh = await restarted();
      expect(fresh.get('from-api')).toMatchObject({ source: { kind: 'api' }, version: registry.get('from-api')!.version });
      expect(listening('task.completed', fresh)).toEqual(['from-api']);
    });

    it('stay gone once deleted, for a registry started anew too', async () => {
      await core.apiRules.create(aDefinition('from-api'));
      await core.apiRules.remove('from-api');

      expect(registry.get('from-api')).toBeUndefined();
      expect((await restarted()).get('from-api')).toBeUndefined();
    });

    it('keep their id when a rule file later claims it, and the file gets the problem', async () => {
      await core.apiRules.create(aDefinition('shared'));
      writeRules('shared.json', aDefinition('shared', { name: 'From a file' }));
      await registry.reload();

      expect(registry.get('shared')?.source).toEqual({ kind: 'api' });
      expect(registry.problems).toEqual([
        { file: pathOf('shared.json'), path: '$.id', message: 'rule id "shared" is taken by a rule created through the admin API' },
      ]);
    });
  });

  describe('changes through the admin API that are refused', () => {
    const codeOf = (work: Promise<unknown>) => work.then(() => 'none', (error: DomainError) => error.code);

    it('refuses a rule that takes a file rule’s id, or changes a file rule, or is invalid', async () => {
      writeRules('a.json', aDefinition('a'));
      await registry.reload();

      expect(await codeOf(core.apiRules.create(aDefinition('a')))).toBe('rule_id_taken');
      expect(await codeOf(core.apiRules.replace('a', aDefinition('a')))).toBe('rule_defined_in_file');
      expect(await codeOf(core.apiRules.create({ id: 'no-actions', on: 'task.completed' }))).toBe('validation_failed');
      expect(await core.db.manager.count(ApiRuleEntity)).toBe(0);
    });
  });

  describe('an operator’s enable/disable override', () => {
    it('takes a rule out of the index at once, and survives a reload and a new registry', async () => {
      writeRules('a.json', aDefinition('a'));
      await registry.reload();
      await registry.setEnabled('a', false, core.clock.now());
      expect(registry.get('a')?.enabled).toBe(false);
      expect(listening('task.completed')).toEqual([]);

      writeRules('a.json', aDefinition('a', { name: 'Changed while disabled' }));
      await registry.reload();
      expect(registry.get('a')).toMatchObject({ enabled: false, definition: { name: 'Changed while disabled' } });
      const fresh = await restarted();
      expect(fresh.get('a')?.enabled).toBe(false);
      expect(listening('task.completed', fresh)).toEqual([]);
    });

    it('enables a rule its file disables, and that survives a new registry too', async () => {
      writeRules('off.json', aDefinition('off', { enabled: false }));
      await registry.reload();
      expect(listening('task.completed')).toEqual([]);

      await registry.setEnabled('off', true, core.clock.now());
      expect(listening('task.completed', await restarted())).toEqual(['off']);
    });
  });
});
