import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../database/data-source.js';
import { EventEntity, type EventStatus } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { toLoadedRule } from '../rules/rule-files.js';
import { RuleStateEntity } from '../database/rule-state.entity.js';
import type { CliContext } from './cli-output.js';
import { displayUrl, enabledRules, parseArgs, rulesBacktest, USAGE } from './rules-backtest.js';

const RULES = 'test/fixtures/cli/backtest-rules';
const BUILT = 'dist/cli/rules-backtest.js';

function capture(overrides: Partial<CliContext> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env: {}, stdout: (line) => out.push(line), stderr: (line) => err.push(line), color: false, ...overrides };
  return { context, out, err };
}

async function runBacktestCommand(args: string[], overrides: Partial<CliContext> = {}) {
  const captured = capture(overrides);
  const code = await rulesBacktest(args, captured.context);
  return { code, ...captured };
}

// ---- a history, as the engine would have stored it -------------------------

interface StoredEvent {
  id: string;
  type: string;
  task: Record<string, unknown>;
  changes?: Record<string, unknown>;
  status: EventStatus;
  /** Rules that matched the event then. */
  matched?: string[];
}

const at = (minute: number) => new Date(Date.UTC(2025, 5, 1, 10, minute)).toISOString();

/** Oldest first. The rules then: the release follow-up looked at prj_1 only; escalation ignored the assignee. */
const HISTORY: StoredEvent[] = [
  { id: 'evt_bt_1', type: 'task.completed', task: { id: 'tsk_1', project_id: 'prj_1', title: 'Release 1.0', assignee_id: 'usr_1' }, status: 'processed', matched: ['release-follow-up'] },
  { id: 'evt_bt_2', type: 'task.completed', task: { id: 'tsk_2', project_id: 'prj_1', title: 'Fix a typo', assignee_id: 'usr_1' }, status: 'ignored' },
  { id: 'evt_bt_3', type: 'task.completed', task: { id: 'tsk_3', project_id: 'prj_2', title: 'Release 2.0', assignee_id: null }, status: 'ignored' },
  {
    id: 'evt_bt_4', type: 'task.updated', task: { id: 'tsk_4', project_id: 'prj_2', title: 'Login screen', status: 'blocked', assignee_id: null },
    changes: { status: { from: 'open', to: 'blocked' } }, status: 'processed', matched: ['escalate-on-block'],
  },
  { id: 'evt_bt_5', type: 'task.created', task: { id: 'tsk_5', project_id: 'prj_2', title: 'Onboarding' }, status: 'processed', matched: ['api-only-rule'] },
  { id: 'evt_bt_6', type: 'task.completed', task: { id: 'tsk_6', project_id: 'prj_1', title: 'Release 3.0' }, status: 'received' },
];

async function withDatabase<T>(url: string, work: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const dataSource = new DataSource(dataSourceOptions(url));
  await dataSource.initialize(); // the migrations create the engine's schema
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

async function storeHistory(dataSource: DataSource, history: StoredEvent[]): Promise<void> {
  for (const [minute, item] of history.entries()) {
    const envelope = { id: item.id, type: item.type, created_at: at(minute), data: { task: item.task, ...(item.changes ? { changes: item.changes } : {}) } };
    const event = await dataSource.manager.save(EventEntity, {
      eventId: item.id, type: item.type, resourceKey: `task:${String(item.task.id)}`, status: item.status, source: 'webhook',
      payload: JSON.stringify(envelope), receivedAt: at(minute), processedAt: item.status === 'received' ? null : at(minute), nextAttemptAt: at(minute),
    });
    for (const ruleId of item.matched ?? []) {
      await dataSource.manager.insert(ExecutionEntity, {
        id: randomUUID(), eventSeq: event.seq, eventId: item.id, ruleId, ruleVersion: 'then000000000000', status: 'succeeded',
        conditions: '[]', ruleSnapshot: '{}', error: null, createdAt: at(minute), finishedAt: at(minute),
      });
    }
  }
}

describe(rulesBacktest.name, () => {
  let dir: string;
  let database: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rules-backtest-'));
    database = `sqlite:${join(dir, 'engine.sqlite')}`;
    await withDatabase(database, (dataSource) => storeHistory(dataSource, HISTORY));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe('differences from what happened', () => {
    it('lists newly matched rules with their requests, rules no longer matched, then a summary', async () => {
      const { code, out } = await runBacktestCommand([RULES, '--database', database]);
      expect(code).toBe(0);
      expect(out).toEqual([
        `backtest 2 rules from ${RULES} against ${database}`,
        'skipped, disabled: quiet-rule (file); --include-disabled tests them too',
        '',
        `evt_bt_3  task.completed  received ${at(2)}, ignored then`,
        '  + release-follow-up  would match now, did not then',
        '      → 1. task.create: POST /v1/tasks',
        '          {"project_id":"prj_2","title":"Review: Release 2.0"}',
        '',
        `evt_bt_4  task.updated  received ${at(3)}, processed then`,
        '  - escalate-on-block  matched then (succeeded), would not now',
        '',
        'per rule             would match  matched then',
        '  escalate-on-block            0             1',
        '  release-follow-up            2             1',
        '  api-only-rule                -             1  (not backtested)',
        'note: Dry run: nothing was sent and nothing was stored.',
        expect.stringMatching(/^note: Lookups/),
        'note: Delays are shown as their duration, not waited for.',
        expect.stringMatching(/^note: Differences compare only the rules backtested/),
        expect.stringMatching(/^note: The changes fact/),
        expect.stringMatching(/^note: Loop protection as recorded/),
        '5 events checked: 2 would match, 3 matched then, 2 differing',
      ]);
    });

    it('reports invalid rule files on stderr and skips them, as the engine does', async () => {
      const { code, err } = await runBacktestCommand([RULES, '--database', database]);
      expect(code).toBe(0);
      expect(err).toEqual([
        `${RULES}/broken.json: $.condtions: unknown property "condtions" (did you mean "conditions"?)`,
        'rules:backtest: 1 problem in 1 file: the invalid rules are skipped, as the engine does',
      ]);
    });

    it('exits 1 with --fail-on-difference when some event differs, 0 when none does', async () => {
      expect((await runBacktestCommand([RULES, '--database', database, '--fail-on-difference'])).code).toBe(1);
      const calm = await runBacktestCommand([RULES, '--database', database, '--fail-on-difference', '--type', 'task.created']);
      expect(calm.code).toBe(0);
      expect(calm.out.at(-1)).toBe('1 event checked: 0 would match, 1 matched then, 0 differing');
    });

    it('prints the raw report with --json', async () => {
      const { code, out } = await runBacktestCommand([RULES, '--database', database, '--json']);
      expect(code).toBe(0);
      const report = JSON.parse(out.join('\n'));
      expect(report.summary).toEqual({
        events: 5, would_match: 2, matched_then: 3, differing: 2,
        rules: { 'release-follow-up': { would_match: 2, matched_then: 1 }, 'escalate-on-block': { would_match: 0, matched_then: 1 }, 'api-only-rule': { would_match: 0, matched_then: 1 } },
      });
      const third = report.events.find((e: { event: { id: string } }) => e.event.id === 'evt_bt_3');
      expect(third.differences).toEqual({ newly_matched: ['release-follow-up'], no_longer_matched: [] });
      expect(third.would_match[0].actions[0].request).toEqual({
        operation: 'tasks.create', method: 'POST', path: '/tasks', body: { project_id: 'prj_2', title: 'Review: Release 2.0' },
        createsIn: { kind: 'task', parent: 'project:prj_2' },
      });
    });
  });

  describe('disabled rules', () => {
    it('backtests them with --include-disabled', async () => {
      const { out } = await runBacktestCommand([RULES, '--database', database, '--include-disabled', '--type', 'task.completed']);
      expect(out[0]).toBe(`backtest 3 rules from ${RULES} against ${database}`);
      expect(out).toContain('  + quiet-rule  would match now, did not then');
      expect(out).toContain('      → 1. task.delete: DELETE /v1/tasks/tsk_2');
    });

    it('follows the enable/disable choice stored through the admin API over the file', () => {
      const rule = (id: string, enabled: boolean) => toLoadedRule({ id, enabled, on: 'x', actions: [{ type: 'task.delete', params: { id: '1' } }] }, { kind: 'file', path: `${id}.json` });
      const rules = [rule('on-in-file', true), rule('off-in-file', false), rule('switched-off', true), rule('switched-on', false)];
      const { enabled, disabled } = enabledRules(rules, new Map([['switched-off', false], ['switched-on', true]]));
      expect(enabled.map((r) => [r.id, r.enabled])).toEqual([['on-in-file', true], ['switched-on', true]]);
      expect(disabled).toEqual([{ id: 'off-in-file', by: 'file' }, { id: 'switched-off', by: 'admin API' }]);
      const all = enabledRules(rules, new Map([['switched-off', false]]), true);
      expect(all.enabled.map((r) => [r.id, r.enabled])).toEqual(rules.map((r) => [r.id, true]));
      expect(all.disabled).toEqual([]);
    });

    it('skips a rule disabled through the admin API', async () => {
      const copy = `sqlite:${join(dir, 'switched.sqlite')}`;
      await withDatabase(copy, async (dataSource) => {
        await storeHistory(dataSource, HISTORY.slice(0, 3));
        await dataSource.manager.insert(RuleStateEntity, { ruleId: 'release-follow-up', enabled: false, updatedAt: at(10) });
      });
      const { out } = await runBacktestCommand([RULES, '--database', copy]);
      expect(out[1]).toBe('skipped, disabled: quiet-rule (file), release-follow-up (admin API); --include-disabled tests them too');
    });
  });

  describe('which events', () => {
    it.each([
      [['--type', 'task.updated'], '1 event checked: 0 would match, 1 matched then, 1 differing'],
      [['--since', at(3)], '2 events checked: 0 would match, 2 matched then, 1 differing'],
      [['--until', '2025-06-01T10:02:30+00:00'], '3 events checked: 2 would match, 1 matched then, 1 differing'],
      [['--since', at(1), '--until', at(2)], '2 events checked: 1 would match, 0 matched then, 1 differing'],
      [['--type', 'nothing.happened'], '0 events checked: no stored event matches the filter'],
    ])('filters with %j', async (filter, summary) => {
      const { code, out } = await runBacktestCommand([RULES, '--database', database, ...filter]);
      expect(code).toBe(0);
      expect(out.at(-1)).toBe(summary);
    });

    it('takes the newest --limit events and says so', async () => {
      const { out } = await runBacktestCommand([RULES, '--database', database, '--limit', '2']);
      expect(out).toContain('note: only the newest 2 events were checked: --limit N for more');
      expect(out.at(-1)).toBe('2 events checked: 0 would match, 2 matched then, 1 differing');
    });

    it('reads PATH and the database from RULES_DIR and DATABASE_URL', async () => {
      const { code, out } = await runBacktestCommand([], { env: { RULES_DIR: RULES, DATABASE_URL: database } });
      expect(code).toBe(0);
      expect(out.at(-1)).toBe('5 events checked: 2 would match, 3 matched then, 2 differing');
      expect(parseArgs([], {})).toMatchObject({ options: { rulesPath: './rules', databaseUrl: 'sqlite:./data/engine.sqlite' } });
    });
  });

  describe('database errors', () => {
    it('exits 2 when the SQLite file does not exist, and does not create it', async () => {
      const missing = join(dir, 'nowhere', 'engine.sqlite');
      const { code, out, err } = await runBacktestCommand([RULES, '--database', `sqlite:${missing}`]);
      expect({ code, out }).toEqual({ code: 2, out: [] });
      expect(err.at(-1)).toBe(`rules:backtest: database file not found: ${missing} (pass the engine's database with --database sqlite:PATH, or set DATABASE_URL)`);
      expect(existsSync(join(dir, 'nowhere'))).toBe(false);
    });

    it('exits 2 for a file that is not the engine\'s database', async () => {
      const other = join(dir, 'other.sqlite');
      writeFileSync(other, '');
      const { code, err } = await runBacktestCommand([RULES, '--database', `sqlite:${other}`]);
      expect(code).toBe(2);
      expect(err.at(-1)).toBe(`rules:backtest: sqlite:${other} has no events table: is it the engine's database?`);
    });

    it.each([
      ['sqlite::memory:', "an in-memory database holds no stored events: pass the engine's database with --database sqlite:PATH"],
      ['mysql://localhost/engine', '--database / DATABASE_URL must be sqlite:PATH or postgres://…, got a value starting "mysql:"'],
    ])('exits 2 for %s', async (url, message) => {
      const { code, err } = await runBacktestCommand([RULES, '--database', url]);
      expect(code).toBe(2);
      expect(err.at(-1)).toBe(`rules:backtest: ${message}`);
    });

    it('never prints a PostgreSQL password', () => {
      expect(displayUrl('postgres://engine:s3cret@db:5432/engine')).toBe('postgres://engine:***@db:5432/engine');
    });
  });

  describe('usage errors', () => {
    it.each([
      [['--since', 'yesterday'], '--since must be an ISO-8601 date-time, got "yesterday"'],
      [['--since', at(5), '--until', at(1)], '--since is after --until'],
      [['--limit', '0'], '--limit must be a whole number from 1 to 5000, got "0"'],
      [['--limit', '10x'], '--limit must be a whole number from 1 to 5000, got "10x"'],
      [['--type'], '--type needs a value'],
      [['a', 'b'], 'expected one PATH, got 2'],
      [['--dry'], 'unknown option --dry'],
    ])('exits 2 with the usage for %j', async (args, message) => {
      const { code, out, err } = await runBacktestCommand(args);
      expect({ code, out }).toEqual({ code: 2, out: [] });
      expect(err).toEqual([`rules:backtest: ${message}`, USAGE]);
    });

    it('exits 2 when the rules path does not exist', async () => {
      const { code, err } = await runBacktestCommand(['test/fixtures/cli/nowhere', '--database', database]);
      expect(code).toBe(2);
      expect(err).toEqual(['rules:backtest: rules path not found: test/fixtures/cli/nowhere']);
    });

    it('prints the usage and exits 0 for --help', async () => {
      expect(await runBacktestCommand(['--help'])).toMatchObject({ code: 0, out: [USAGE] });
    });
  });

  describe('the built command', () => {
    function runBuilt(args: string[]) {
      if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: build first (npx nest build; npm test does it)`);
      return spawnSync(process.execPath, [BUILT, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
    }

    it('runs as a program against the database file and exits 1 on differences with --fail-on-difference', () => {
      const child = runBuilt([RULES, '--database', database, '--fail-on-difference']);
      expect(child.status).toBe(1);
      expect(child.stdout).not.toContain('\u001b');
      expect(child.stdout.trimEnd().split('\n').at(-1)).toBe('5 events checked: 2 would match, 3 matched then, 2 differing');
      expect(child.stderr).toContain('broken.json: $.condtions: unknown property');
    });

    it('prints JSON with --json and exits 2 on a missing database', () => {
      const json = runBuilt([RULES, '--database', database, '--json']);
      expect(json.status).toBe(0);
      expect(JSON.parse(json.stdout).summary.differing).toBe(2);
      expect(runBuilt([RULES, '--database', `sqlite:${join(dir, 'missing.sqlite')}`]).status).toBe(2);
    });
  });
});
