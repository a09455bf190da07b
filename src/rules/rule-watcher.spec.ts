import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { databasesUnderTest } from '../../test/support/databases.js';
import { waitUntil } from '../../test/support/wait.js';
import { openCore, type Core } from '../../test/support/core.js';
import { RuleWatcher } from './rule-watcher.js';
import type { RuleDefinition } from './rule.types.js';

const kinds = await databasesUnderTest('rule watcher');

const aDefinition = (id: string, title: string): RuleDefinition => ({
  id,
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title } }],
});

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${RuleWatcher.name} on $name`, (kind) => {
  let core: Core;
  let watcher: RuleWatcher;
  const write = (file: string, definition: RuleDefinition) => writeFileSync(join(core.config.rulesDir, file), JSON.stringify(definition));
  const titleOf = (id: string) => (core.registry.get(id)?.definition.actions[0] as { params: { title: string } } | undefined)?.params.title;

  beforeEach(async () => {
    core = await openCore(kind);
    write('a.json', aDefinition('a', 'first'));
    await core.registry.reload();
    watcher = new RuleWatcher(core.config, core.registry);
  });

  afterEach(async () => {
    await watcher.onApplicationShutdown();
    await core.close();
  });

  it('catches up with a change made after the rules were read and before it started watching', async () => {
    // Made before the watcher looks at the folder: it reports no event for it (it ignores what it first finds).
    write('a.json', aDefinition('a', 'second, written before the watcher started'));
    write('b.json', aDefinition('b', 'added before the watcher started'));
    watcher.onApplicationBootstrap();
    await waitUntil(() => titleOf('a') === 'second, written before the watcher started' && titleOf('b') !== undefined, { timeoutMs: 5_000, what: 'the catch-up reload' });
  });

  it('reloads on a change made once it watches', async () => {
    watcher.onApplicationBootstrap();
    expect(titleOf('a')).toBe('first');
    // Seen by the watcher, or by its catch-up should its first look at the folder not be over yet.
    write('a.json', aDefinition('a', 'changed while watched'));
    await waitUntil(() => titleOf('a') === 'changed while watched', { timeoutMs: 5_000, what: 'the reload after the change' });
  });
});
