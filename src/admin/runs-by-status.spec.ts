/**
 * GET /admin/actions?status=… (AdminQueryService.listActionRuns) on a real
 * database of 12,000 runs: every status's pages, followed cursor to cursor,
 * give exactly its runs newest first; and on SQLite a common status is walked
 * newest first (runs-by-status.ts), not read whole and sorted.
 */
import { Logger } from '@nestjs/common';
import type { Repository } from 'typeorm';
import { ActionRunEntity, type ActionRunStatus } from '../database/action-run.entity.js';
import type { Database } from '../database/database.service.js';
import { EventEntity } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { queryRows } from '../database/sql.js';
import type { RuleRegistry } from '../rules/rule-registry.service.js';
import { databasesUnderTest, type TestDatabase } from '../../test/support/databases.js';
import { ManualClock, openDatabase, sqlitePlan } from '../../test/support/storage.js';
import { AdminQueryService } from './admin-query.service.js';
import { walkThreshold } from './runs-by-status.js';

const kinds = await databasesUnderTest('action runs listed by status');

const RUNS = 12_000;
const START = Date.parse('2026-11-01T00:00:00.000Z');

interface Seeded {
  id: string;
  status: ActionRunStatus;
  createdAt: string;
}

/**
 * Mostly succeeded; failed spread over time (one in 40); retrying only among the newest; pending only among the
 * oldest (common, but never on the first pages). Two runs a millisecond, so that pages break inside a timestamp.
 */
function seeded(): Seeded[] {
  return Array.from({ length: RUNS }, (_, i) => {
    const status: ActionRunStatus = i % 40 === 7 ? 'failed' : i >= RUNS - 30 ? 'retrying' : i < 2_500 ? 'pending' : 'succeeded';
    // Ids not in time order: the tie-break of a shared timestamp is the id's.
    return { id: `run_${String((i * 7_919) % RUNS).padStart(6, '0')}`, status, createdAt: new Date(START + Math.floor(i / 2)).toISOString() };
  });
}

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('action runs listed by status on $name', (kind) => {
  let testDb: TestDatabase;
  let db: Database;
  let queries: AdminQueryService;
  const runs = seeded();

  beforeAll(async () => {
    testDb = await kind.create();
    db = await openDatabase(testDb.url);
    for (let start = 0; start < runs.length; start += 500) {
      const chunk = runs.slice(start, start + 500);
      await db.write((m) =>
        m.insert(ActionRunEntity, chunk.map((r, j) => ({
          id: r.id, executionId: `exe_${start + j}`, eventSeq: start + j + 1, resourceKey: null, scopeKind: null, scopeParent: null,
          ruleId: 'follow-up', position: 0, actionId: null, type: 'task.create', status: r.status, attempts: 1,
          nextAttemptAt: r.createdAt, leaseOwner: null, leaseUntil: null, request: null, createdAt: r.createdAt, updatedAt: r.createdAt,
        }))),
      );
    }
    const repository = <T extends object>(entity: new () => T) => db.dataSource.getRepository(entity) as Repository<T>;
    // The rules loaded are not read by the list of action runs.
    queries = new AdminQueryService(repository(EventEntity), repository(ExecutionEntity), repository(ActionRunEntity), undefined as unknown as RuleRegistry, new ManualClock(new Date(START)));
  });

  afterAll(async () => {
    await db.dataSource.destroy();
    await testDb.drop();
  });

  /** Every page of the list, cursor to cursor: the runs' ids in the order given. */
  async function everyPage(status: ActionRunStatus, limit: number): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 1_000; pages += 1) {
      const page = await queries.listActionRuns({ status, cursor }, limit);
      ids.push(...page.items.map((run) => (run as { id: string }).id));
      if (page.next_cursor === null) return ids;
      cursor = page.next_cursor;
    }
    throw new Error('the pages did not end');
  }

  const newestFirst = (status: ActionRunStatus) =>
    runs.filter((r) => r.status === status)
      .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1))
      .map((r) => r.id);

  it.each([
    ['succeeded', 500],
    ['succeeded', 37],
    ['pending', 200],
    ['failed', 50],
    ['retrying', 7],
    ['cancelled', 50],
  ] as Array<[ActionRunStatus, number]>)('gives every %s run once, newest first, in pages of %i', async (status, limit) => {
    const expected = newestFirst(status);
    expect(await everyPage(status, limit)).toEqual(expected);
  });

  if (kind.name === 'sqlite') {
    /** The statements a page of `status` runs, and each one's plan. */
    async function statementsOfAPage(status: ActionRunStatus, cursor?: string): Promise<Array<{ sql: string; plan: string }>> {
      const statements: string[] = [];
      const logger = db.dataSource.logger;
      db.dataSource.logger = { ...logger, logQuery: (query: string) => void statements.push(query) } as typeof logger;
      try {
        await queries.listActionRuns({ status, cursor }, 50);
      } finally {
        db.dataSource.logger = logger;
      }
      return Promise.all(statements.filter((sql) => /action_runs/.test(sql)).map(async (sql) => ({ sql, plan: await sqlitePlan(db, sql) })));
    }

    it('walks a common status newest first: no statement of its page sorts runs, first page or later', async () => {
      const first = await queries.listActionRuns({ status: 'succeeded' }, 50);
      for (const cursor of [undefined, first.next_cursor!]) {
        const statements = await statementsOfAPage('succeeded', cursor);
        expect(statements.some(({ plan }) => plan.includes('idx_action_runs_created'))).toBe(true);
        expect(statements.filter(({ plan }) => /TEMP B-TREE/.test(plan))).toEqual([]);
      }
    });

    it('reads a rare status through its index and sorts only its runs', async () => {
      const statements = await statementsOfAPage('failed');
      const page = statements.find(({ sql }) => /ORDER BY/.test(sql) && !/INDEXED BY/.test(sql));
      expect(page?.plan).toMatch(/idx_action_runs_due/);
      expect(statements.some(({ plan }) => plan.includes('idx_action_runs_created'))).toBe(false);
    });

    it('walks a status of more runs than √(P·N), 1,000 at least, and sorts one of fewer', async () => {
      expect(walkThreshold(51, 200_000)).toBe(3_194);
      expect(walkThreshold(51, RUNS)).toBe(1_000);
      const succeeded = runs.filter((r) => r.status === 'succeeded').map((r) => r.id);
      const skip = (ids: string[]) => db.write((m) => queryRows(m, `UPDATE action_runs SET status = 'skipped' WHERE id IN (${ids.map(() => '?').join(', ')})`, ids));
      const walked = async () => (await statementsOfAPage('skipped')).some(({ plan }) => plan.includes('idx_action_runs_created'));
      try {
        await skip(succeeded.slice(0, 500));
        await skip(succeeded.slice(500, 1_000));
        expect(await walked()).toBe(false);
        await skip(succeeded.slice(1_000, 1_001));
        expect(await walked()).toBe(true);
      } finally {
        await db.write((m) => queryRows(m, `UPDATE action_runs SET status = 'succeeded' WHERE status = 'skipped'`));
      }
    });
  }
});
