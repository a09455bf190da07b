/**
 * PostgreSQL: an execution's end is a heap-only (HOT) update (migration
 * 1766100000000). No index of executions holds `status` or tests it, so an
 * execution that never waited changes no indexed value as it ends, and its
 * page has room for the new version: no index entry is written. The
 * debounce finds a rule's waiting executions through idx_executions_waiting
 * on both databases, whose predicate differs (PostgreSQL: `resume_at IS NOT
 * NULL`; SQLite: `status = 'waiting'`) and which it implies both; a cancel
 * finds them by its resource's earlier events. And the executions a
 * debounce collapsed are found by the one they point at through their own
 * index, not by reading every execution (migration 1766200000000). A real
 * server and the simulator over HTTP.
 */
import { Logger } from '@nestjs/common';
import { queryRows } from '../database/sql.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { taskEvent, useCoreWithSimulator } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { sqlitePlan } from '../../test/support/storage.js';
import { waitUntil } from '../../test/support/wait.js';
import { CANCEL_FOR_RESOURCE, DEBOUNCE_EARLIER, DEBOUNCE_REPOINT } from './waiting.js';

const kinds = await databasesUnderTest('executions ended by HOT updates');

/** A page of the admin API's list of executions (admin-query.service.ts), as TypeORM writes it: all of them, or by status. */
const PAGE = 'SELECT * FROM executions ORDER BY created_at DESC, id DESC LIMIT 51';
const PAGE_BY_STATUS = 'SELECT * FROM executions WHERE status = ? ORDER BY created_at DESC, id DESC LIMIT 51';
/** A page of the list of action runs, all of them (SQLite). */
const RUNS_PAGE = 'SELECT * FROM action_runs ORDER BY created_at DESC, id DESC LIMIT 51';

const make = aRule({ id: 'make', actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Made for {{ event.id }}' } }] });

beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)('the executions of $name', (kind) => {
  const rig = useCoreWithSimulator(kind);
  const core = () => rig.core;
  const rows = <T>(sql: string, params: unknown[] = []) => queryRows<T>(core().db.manager, sql, params);

  if (kind.name === 'postgres') {
    it('have no index that holds or tests their status', async () => {
      const indexes = await rows<{ indexname: string; indexdef: string }>(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions'`);
      expect(indexes.map((i) => i.indexname)).toEqual(expect.arrayContaining(['idx_executions_created', 'idx_executions_waiting']));
      expect(indexes.filter((i) => /status/i.test(i.indexdef))).toEqual([]);
    });

    it('end without writing an index entry: every update of an execution that never waited is HOT', async () => {
      core().useRules(make);
      const events = 20;
      for (let i = 0; i < events; i += 1) {
        const event = taskEvent('task.completed', { title: `Task ${i}` });
        await core().store(event);
        await core().processNext();
        expect(await core().performNext()).toMatchObject({ status: 'succeeded' });
        expect((await core().executions(event.id))[0]).toMatchObject({ status: 'succeeded' });
      }
      // A session's table statistics reach pg_stat_user_tables within a second or so of its last transaction.
      type Counts = { updates: number; hot: number };
      const stats = () =>
        rows<Counts>(`SELECT n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'executions'`);
      const counted = await waitUntil(async () => {
        const [read] = await stats();
        return read !== undefined && read.updates >= events && read;
      }, { timeoutMs: 15_000, what: "the executions' updates in pg_stat_user_tables" });
      expect(counted.updates).toBe(events);
      expect(counted.hot).toBe(counted.updates);
    });

    it('are found waiting through idx_executions_waiting, collapsed by the one they point at, and listed newest first (all, or by status), however many ended', async () => {
      const now = '2026-11-30T00:00:00.000Z';
      // 5,000 ended executions of a debounced rule: one in a thousand waits, one in a hundred was collapsed into a later one.
      await rows(
        `INSERT INTO executions (id, event_seq, event_id, rule_id, rule_version, status, conditions, rule_snapshot, created_at, finished_at, resume_at,
                                 debounce_key, debounced_into)
         SELECT 'x-' || g, g, 'evt-' || g, 'debounced', '1', CASE WHEN g % 1000 = 0 THEN 'waiting' ELSE 'succeeded' END, '[]', '{}', ?, ?,
                CASE WHEN g % 1000 = 0 THEN ? END, 'key-' || (g % 7), CASE WHEN g % 100 = 0 THEN 'x-' || (g + 1) END
         FROM generate_series(1, 5000) g`,
        [now, now, now],
      );
      await rows('ANALYZE executions');
      const planOf = async (sql: string, params: unknown[]) => JSON.stringify(await rows(`EXPLAIN (FORMAT JSON) ${sql}`, params));
      expect(await planOf(DEBOUNCE_EARLIER, ['into', now, 'debounced', 'key-1'])).toContain('idx_executions_waiting');
      expect(await planOf(DEBOUNCE_REPOINT, ['x-9', 'x-101'])).toContain('idx_executions_debounced_into');
      // The admin API's lists, all or by status: a walk newest first, not a sort of them all.
      for (const page of [PAGE, PAGE_BY_STATUS]) {
        const plan = await planOf(page, page === PAGE ? [] : ['succeeded']);
        expect(plan).toContain('idx_executions_created');
        expect(plan).not.toContain('"Sort"');
      }
      // A cancel finds them by its resource's earlier events (by key), or by the rule's waiting ones: never a walk of them all.
      expect(await planOf(CANCEL_FOR_RESOURCE, ['evt', now, 'debounced', 'task:tsk_1', 10_000])).not.toContain('Seq Scan');
    });
  } else {
    it('are found waiting through idx_executions_waiting, and collapsed by the one they point at', async () => {
      expect(await sqlitePlan(core().db, DEBOUNCE_EARLIER)).toContain('idx_executions_waiting');
      expect(await sqlitePlan(core().db, DEBOUNCE_REPOINT)).toContain('idx_executions_debounced_into');
    });

    it('are listed newest first without a sort of them all, and so are all action runs (migration 1766300000000)', async () => {
      const plan = await sqlitePlan(core().db, PAGE);
      expect(plan).toContain('idx_executions_created');
      expect(plan).not.toContain('TEMP B-TREE');
      const runsPlan = await sqlitePlan(core().db, RUNS_PAGE);
      expect(runsPlan).toContain('idx_action_runs_created');
      expect(runsPlan).not.toContain('TEMP B-TREE');
      expect(await sqlitePlan(core().db, CANCEL_FOR_RESOURCE)).not.toMatch(/SCAN executions/);
    });
  }
});
