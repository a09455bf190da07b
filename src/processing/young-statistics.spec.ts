/**
 * PostgreSQL plans from statistics, and under a burst they are seconds old:
 * they may say no run is `running` while hundreds are. The batch UPDATE that
 * records outcomes (outcome-batch.ts) must still find its runs through the
 * primary key; planned from a plain `status = 'running'`, it walked the index
 * of runs by status through every running run (and every dead entry of one)
 * for each batch. So must the UPDATE that finishes a batch of evaluated
 * events (event-commit.ts), with the index of events by status. A real
 * server, statistics made stale on purpose.
 *
 * So must the causal barrier and per-resource ordering find the runs in
 * flight through their own partial indexes, not the index of runs by status
 * (which holds every run, and every dead entry of one).
 *
 * So must the claims, when they check again the rows their candidates name,
 * and the seen mark, which finds a batch's resources' waiting events by key:
 * planned from plain conditions on status (and the seen flag), they read
 * every entry, dead ones included, of the indexes those conditions name.
 *
 * And a batch UPDATE joins its rows (`t`) to the rows it updates without
 * reading `t` again for each of them: with its guards against constants, the
 * planner counted one row to update and made the join a nested loop, 65,280
 * rows compared for a batch of 256 events (batched-statements.ts
 * `guardedRowsOf`).
 */
import { Logger } from '@nestjs/common';
import { planEachTime, PLANNED_ONCE_BY_KEY, planOnceByKey, plannedOnce } from '../database/planned-once.js';
import { queryRows, toDialect } from '../database/sql.js';
import { statementsOf } from '../database/statements.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { aRule } from '../../test/support/rule-factory.js';
import { INSERT_MANY, insertDecidingSql } from '../intake/event-insert-sql.js';
import { EventCommit, FINISH_MANY, MARK_SEEN_MANY } from './event-commit.js';
import { FINISH_EXECUTIONS, RECORD_MANY } from './outcome-batch.js';
import { claimActionRunsSql, claimEventsSql, freshLeaseSql } from './work-queue.js';

const postgres = (await databasesUnderTest('plans on young statistics')).filter((kind) => kind.name === 'postgres');

beforeAll(() => Logger.overrideLogger(false));

describe.each(postgres)('on $name, with statistics that say nothing is running', (kind) => {
  let core: Core;
  beforeEach(async () => {
    core = await openCore(kind);
  });
  afterEach(() => core.close());

  async function planOf(sql: string, params: unknown[]): Promise<string> {
    const rows = await queryRows<{ 'QUERY PLAN': unknown }>(core.db.manager, `EXPLAIN (FORMAT JSON) ${sql}`, params);
    return JSON.stringify(rows[0]['QUERY PLAN']);
  }

  it('records a batch of outcomes through the primary key, not the index of runs by status', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await queryRows(
      core.db.manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'run-' || g, 'x-' || g, g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ? FROM generate_series(1, 3000) g`,
      [now, now, now],
    );
    await queryRows(core.db.manager, 'ANALYZE action_runs');
    // After the statistics: a thousand runs in flight that they do not know of.
    await queryRows(core.db.manager, `UPDATE action_runs SET status = 'running', lease_owner = 'me' WHERE event_seq > 2000`);

    const ids = ['run-2001', 'run-2002', 'run-2003'];
    const column = (value: unknown) => ids.map(() => value);
    const plan = await planOf(RECORD_MANY, [
      column('succeeded'), column(now), column(now), column(null), column(201), column(null), column(null), column(null), ids, column('me'), ids,
    ]);
    expect(plan).not.toContain('idx_action_runs_due');
    // Probed by id (the primary key, or the partial index of leased runs, also keyed by id).
    expect(plan).toMatch(/"Index Cond":"\(\(id\)::text = ANY/);
  });

  it('finishes a batch of evaluated events through the primary key, not the index of events by status', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await queryRows(
      core.db.manager,
      `INSERT INTO events (event_id, type, status, source, payload, received_at, next_attempt_at)
       SELECT 'evt-' || g, 'task.updated', 'processed', 'webhook', '{}', ?, ? FROM generate_series(1, 3000) g`,
      [now, now],
    );
    await queryRows(core.db.manager, 'ANALYZE events');
    await queryRows(core.db.manager, `UPDATE events SET status = 'received', lease_owner = 'me' WHERE seq > 2000`);

    const seqs = [2001, 2002, 2003];
    const column = (value: unknown) => seqs.map(() => value);
    const plan = await planOf(FINISH_MANY, [
      column('processed'), column(0), column(false), column(null), column(now), column(0), column(now), column('[]'), seqs, column('me'), seqs,
    ]);
    expect(plan).not.toContain('idx_events_status_seq');
    expect(plan).toMatch(/"Index Cond":"\(seq = ANY/);
  });

  type PlanNode = { 'Node Type': string; Alias?: string; 'Index Name'?: string; 'Index Cond'?: string; Plans?: PlanNode[] };

  /** The indexes `sql`'s plan reads to find the rows of table alias `alias` (bitmaps under their heap scan included). */
  async function indexesFor(alias: string, sql: string, params: unknown[]): Promise<{ indexes: string[]; conditions: string[] }> {
    const rows = await queryRows<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(core.db.manager, `EXPLAIN (FORMAT JSON) ${sql}`, params);
    const found = { indexes: [] as string[], conditions: [] as string[] };
    const under = (node: PlanNode): void => {
      if (node['Index Name']) found.indexes.push(node['Index Name']);
      if (node['Index Cond']) found.conditions.push(node['Index Cond']);
      if (node['Node Type'] !== 'Bitmap Heap Scan' && node.Alias !== alias) return;
      for (const child of node.Plans ?? []) under(child);
    };
    const visit = (node: PlanNode): void => {
      if (node.Alias === alias) under(node);
      else for (const child of node.Plans ?? []) visit(child);
    };
    visit(rows[0]['QUERY PLAN'][0].Plan);
    return found;
  }

  /** The INSERT of events evt-<tag><g> about task:<tag><g>, for g from `from` to `to`, and its parameters. */
  const eventRows = (now: string, { from = 1, to, status, seen = true, tag = '' }: { from?: number; to: number; status: string; seen?: boolean; tag?: string }): [string, unknown[]] => [
    `INSERT INTO events (event_id, type, resource_key, status, source, payload, seen_resource, received_at, next_attempt_at)
     SELECT 'evt-${tag}' || g, 'task.updated', 'task:${tag}' || g, '${status}', 'webhook', '{}', ${seen}, ?, ? FROM generate_series(${from}, ${to}) g`,
    [now, now],
  ];

  /** 3,000 events already processed, about task:1 … task:3000, and statistics taken of them. */
  async function processedEvents(now: string): Promise<void> {
    await queryRows(core.db.manager, ...eventRows(now, { to: 3000, status: 'processed' }));
    await queryRows(core.db.manager, 'ANALYZE events');
  }

  /** The event claim's parameters as claimEventsIn binds them: the lease; the scans before the barrier; after it, seen; after it, unseen; the recheck. */
  const eventClaimParams = (now: string, limit: number) => ['me', now, now, now, limit, now, now, limit, now, now, limit, now, now, now, limit, limit, now, limit];

  it('checks again the events a claim has chosen through the primary key, not an index of waiting events', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await processedEvents(now);
    await queryRows(core.db.manager, `UPDATE events SET status = 'received' WHERE seq > 2000`);

    const limit = 32;
    const { indexes } = await indexesFor('c', claimEventsSql('postgres', '?'), eventClaimParams(now, limit));
    expect(indexes.length).toBeGreaterThan(0);
    expect(indexes.filter((name) => !name.startsWith('PK_'))).toEqual([]);
  });

  it('checks again the action runs a claim has chosen through the primary key, not an index of runs by status', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await queryRows(
      core.db.manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'run-' || g, 'x-' || g, g, 'task:' || g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ? FROM generate_series(1, 3000) g`,
      [now, now, now],
    );
    await queryRows(core.db.manager, 'ANALYZE action_runs');
    await queryRows(core.db.manager, `UPDATE action_runs SET status = 'pending' WHERE event_seq > 2000`);

    const limit = 32;
    // As claimActionRuns binds them: the lease and its time; pending and retrying runs due; the recheck.
    const params = ['me', now, now, now, now, limit, now, now, limit, now, limit];
    const { indexes } = await indexesFor('c', claimActionRunsSql(false), params);
    expect(indexes.length).toBeGreaterThan(0);
    expect(indexes.filter((name) => !name.startsWith('PK_'))).toEqual([]);
  });

  it("marks a batch's resources seen through their key, not the index of waiting unseen events", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await processedEvents(now);
    await queryRows(core.db.manager, `UPDATE events SET status = 'received', seen_resource = FALSE WHERE seq > 2000`);

    const keys = ['task:2001', 'task:2002', 'task:2003'];
    const { indexes, conditions } = await indexesFor('u', MARK_SEEN_MANY, [keys]);
    expect(indexes).toEqual(['idx_events_resource_seq']);
    expect(conditions.join(' ')).toMatch(/resource_key\)::text = k\.key/);
    const marked = await queryRows(core.db.manager, `${MARK_SEEN_MANY} RETURNING seq`, [keys]);
    expect(marked).toHaveLength(3);
  });

  it("marks a whole batch's resources seen by key on a table of a few thousand events, not by reading the table", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await processedEvents(now);
    await queryRows(core.db.manager, `UPDATE events SET status = 'received', seen_resource = FALSE WHERE seq > 2900`);

    // As one `resource_key = ANY(…)` of 64 keys, this was a scan of the whole table.
    const keys = Array.from({ length: 64 }, (_, i) => `task:${2901 + i}`);
    const plan = await planOf(MARK_SEEN_MANY, [keys]);
    expect(plan).not.toContain('Seq Scan');
    expect((await indexesFor('u', MARK_SEEN_MANY, [keys])).indexes).toEqual(['idx_events_resource_seq']);
    const marked = await queryRows<{ seq: number }>(core.db.manager, `${MARK_SEEN_MANY} RETURNING seq`, [keys]);
    expect(marked.map(({ seq }) => Number(seq)).sort((a, b) => a - b)).toEqual(keys.map((_, i) => 2901 + i));
    // Only waiting events about those resources, and only once.
    expect(await queryRows(core.db.manager, `${MARK_SEEN_MANY} RETURNING seq`, [[...keys, 'task:1', 'task:2990']])).toHaveLength(1);
  });

  it("marks a batch's resources seen by key with a plan made once on a few events, once the table has thousands", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const events = (from: number, to: number, status: string, seen: boolean) => eventRows(now, { from, to, status, seen });
    await queryRows(core.db.manager, ...events(1, 3, 'processed', true));
    await queryRows(core.db.manager, 'ANALYZE events');
    const keys = Array.from({ length: 64 }, (_, i) => `task:${2901 + i}`);
    const plan = await preparedPlan(PLANNED_ONCE_BY_KEY, MARK_SEEN_MANY, [keys], [events(4, 2900, 'processed', true), events(2901, 3000, 'received', false)]);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(64 * 4);
    // Without RETURNING the UPDATE itself returns nothing: the rows it changed are those the plan below it found.
    expect(plan.find((n) => n['Node Type'] === 'ModifyTable')?.Plans?.[0]['Actual Rows']).toBe(64);
  });

  it('plans the INSERTs and the seen mark of a batch of evaluated events once per session', async () => {
    core.useRules(aRule({ id: 'in-prj-1', conditions: { all: [{ fact: 'event', path: '$.data.task.project_id', operator: 'equal', value: 'prj_1' }] } }));
    for (let i = 0; i < 4; i++) await core.store(taskEvent('task.completed'));
    const claims = await core.queue.claimEvents(4);
    expect(claims).toHaveLength(4);
    const prepared = await Promise.all(claims.map((claim) => core.processor.prepare(claim)));
    const committer = new EventCommit('postgres', false, core.metrics);
    const now = core.clock.now().toISOString();
    // One transaction, so one session: its prepared statements say how each execution was planned.
    const plans = await core.db.write(async (manager) => {
      const sql = statementsOf(manager);
      for (const batch of [prepared.slice(0, 2), prepared.slice(2)]) expect(await committer.commitAll(sql, batch, core.queue.owner, now)).toHaveLength(2);
      return sql.rows<{ statement: string; generic: number; custom: number }>(
        `SELECT CASE WHEN ltrim(statement) LIKE 'UPDATE%' THEN 'the seen mark' ELSE split_part(ltrim(statement), ' ', 3) END AS statement,
                generic_plans::int AS generic, custom_plans::int AS custom
         FROM pg_prepared_statements WHERE ltrim(statement) LIKE 'INSERT INTO %' OR ltrim(statement) LIKE 'UPDATE events SET seen_resource%'
         ORDER BY 1`,
      );
    });
    expect(plans).toEqual([
      { statement: 'action_runs', generic: 2, custom: 0 },
      { statement: 'executions', generic: 2, custom: 0 },
      { statement: 'resource_snapshots', generic: 2, custom: 0 },
      { statement: 'the seen mark', generic: 2, custom: 0 },
    ]);
    expect(await core.executions(claims[3].event_id)).toHaveLength(1);
  });

  it('walks the due action runs in order and stops at the limit, however few runs the statistics counted', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const manager = core.db.manager;
    // Times in no particular order, so that the heap's order tells nothing of the index's.
    const dueAt = (g: string) => `'2026-11-26T' || lpad(((${g} * 7919) % 1000 / 60)::text, 2, '0') || ':' || lpad(((${g} * 7919) % 60)::text, 2, '0') || ':00.000Z'`;
    await queryRows(
      manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'run-' || g, 'x-' || g, g, 'task:' || g, 'rule', 0, 'task.create',
              CASE WHEN g % 50 = 0 THEN 'pending' WHEN g % 2 = 0 THEN 'running' ELSE 'succeeded' END, 1, ${dueAt('g')}, ?, ?
       FROM generate_series(1, 1000) g`,
      [now, now],
    );
    await queryRows(manager, 'ANALYZE action_runs');
    // After the statistics: 500 more runs queued, all but 30 of them done since (each leaves a dead entry).
    await queryRows(
      manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'new-' || g, 'y-' || g, g, 'task:' || g, 'rule', 0, 'task.create', 'pending', 1, ${dueAt('g + 17')}, ?, ? FROM generate_series(1, 500) g`,
      [now, now],
    );
    await queryRows(manager, `UPDATE action_runs SET status = 'succeeded' WHERE id LIKE 'new-%' AND event_seq > 30`);

    const params = ['me', now, now, now, now, 32, now, now, 32, now, 32];
    type Node = { 'Node Type': string; 'Index Name'?: string; 'Subplan Name'?: string; Alias?: string; Plans?: Node[] };
    const explain = `EXPLAIN (FORMAT JSON) ${claimActionRunsSql(false)}`;
    /** The nodes that find the pending runs (under the subquery pending_runs). */
    const pendingScan = (rows: Array<{ 'QUERY PLAN': Array<{ Plan: Node }> }>) => {
      const found: string[] = [];
      const visit = (node: Node, under: boolean): void => {
        const inside = under || node.Alias === 'pending_runs';
        if (inside) found.push(`${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`);
        for (const child of node.Plans ?? []) visit(child, inside);
      };
      visit(rows[0]['QUERY PLAN'][0].Plan, false);
      return found;
    };
    // On its own, the statement is planned as a read of every pending run and a sort (a bitmap here).
    const plain = pendingScan(await queryRows(manager, explain, params));
    expect(plain).toContain('Sort');
    const claim = pendingScan(await core.db.write((m) => plannedOnce(statementsOf(m), explain, params)));
    expect(claim).toEqual(['Subquery Scan', 'Limit', 'Index Scan idx_action_runs_due']);

    // And claims the first 32 of the 50 runs pending, in due order, none of those done.
    const expected = await queryRows<{ id: string }>(manager, `SELECT id FROM action_runs WHERE status = 'pending' ORDER BY next_attempt_at, id LIMIT 32`);
    const claimed = await core.db.write((m) => plannedOnce<{ id: string }>(statementsOf(m), claimActionRunsSql(false), params));
    expect(claimed).toHaveLength(32);
    expect(claimed.map(({ id }) => id).sort()).toEqual(expected.map(({ id }) => id).sort());
    // The settings were the claim's transaction's alone.
    expect(await queryRows(manager, 'SHOW enable_bitmapscan')).toEqual([{ enable_bitmapscan: 'on' }]);
  });

  /** Intake's INSERT that leases the new events it may (event-writer.ts, work-queue.ts freshLeaseSql). */
  const insertLeasing = insertDecidingSql(freshLeaseSql('postgres'));
  /**
   * Its parameters for new events about unseen tasks received `now`, `id` in project prj_<project> (none: an event
   * about no scope, `project:prj_9`), none decided, leased to 'me', 32 at most.
   */
  const insertLeasingParams = (events: Array<{ id: string; project?: number }>, now: string) => {
    const column = <T>(pick: (e: { id: string; project?: number }) => T) => events.map(pick);
    const scoped = (e: { project?: number }) => e.project !== undefined;
    return [
      now, now, column((e) => e.id), column((e) => (scoped(e) ? 'task.created' : 'project.updated')),
      column((e) => (scoped(e) ? `task:new-${e.id}` : 'project:prj_9')), column((e) => (scoped(e) ? 'task' : null)),
      column((e) => (scoped(e) ? `project:prj_${e.project}` : null)), column(() => 'webhook'), column(() => '{}'), column(() => 0),
      column(() => null), ...Array.from({ length: 6 }, () => column(() => null)), now, 'me', now, 32,
    ];
  };
  /** `count` new events, evt-g in project prj_<g % projects>. */
  const taskEvents = (count: number, projects: number, from = 1) =>
    Array.from({ length: count }, (_, i) => ({ id: `evt-${from + i}`, project: (from + i) % projects }));

  /**
   * `count` creates of tasks made the day before, in projects prj_0 … prj_<projects - 1> (run g in prj_<g % projects>):
   * the first `inFlight` running under a live lease, the others done.
   */
  async function creatingRuns(now: string, count: number, inFlight: number, projects: number): Promise<void> {
    await queryRows(
      core.db.manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at, scope_kind, scope_parent, lease_owner, lease_until)
       SELECT 'run-' || g, 'x-' || g, g, NULL, 'rule', 0, 'task.create', CASE WHEN g <= ${inFlight} THEN 'running' ELSE 'succeeded' END, 1, ?, '2026-11-26T00:00:00.000Z', ?,
              'task', 'project:prj_' || (g % ${projects}), 'me', '2026-11-27T00:01:00.000Z'
       FROM generate_series(1, ${count}) g`,
      [now, now],
    );
  }

  it("looks up the oldest creating run in flight once per scope of a commit's new events, not once per event", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const manager = core.db.manager;
    await creatingRuns(now, 3000, 100, 2);
    await queryRows(manager, 'ANALYZE action_runs, events');

    // Twenty new events about unseen tasks, ten in each of two projects, and one about a project (no scope).
    type Node = { 'Index Name'?: string; 'Actual Loops': number; Plans?: Node[] };
    const params = insertLeasingParams([...taskEvents(20, 2), { id: 'evt-p' }], now);
    const rows = await queryRows<{ 'QUERY PLAN': Array<{ Plan: Node }> }>(manager, `EXPLAIN (ANALYZE, FORMAT JSON) ${insertLeasing} `, params);
    let lookups = 0;
    const visit = (node: Node): void => {
      if (node['Index Name'] === 'idx_action_runs_creating_in_flight') lookups += node['Actual Loops'];
      for (const child of node.Plans ?? []) visit(child);
    };
    visit(rows[0]['QUERY PLAN'][0].Plan);
    expect(lookups).toBe(2);
    // All are leased; the tasks are held behind the creates in their projects (the RETURNING reads the lookups'
    // answers, no index again), the event about no scope is not.
    const leased = await queryRows<{ event_id: string }>(manager, `SELECT event_id FROM events WHERE lease_owner = 'me'`);
    expect(leased).toHaveLength(21);
  });

  type Node = {
    'Node Type': string;
    'Index Name'?: string;
    'Index Cond'?: string;
    'Relation Name'?: string;
    'Actual Rows'?: number;
    'Actual Loops'?: number;
    'Rows Removed by Filter'?: number;
    'Rows Removed by Join Filter'?: number;
    'Parent Relationship'?: string;
    Plans?: Node[];
  };
  /** The rows `node` was fed by its input, not by a CTE or subquery it runs aside (an update: the rows it updated). */
  const rowsFed = (node: Node | undefined) => node?.Plans?.find((child) => !['InitPlan', 'SubPlan'].includes(child['Parent Relationship'] ?? ''))?.['Actual Rows'];
  /** Rows the scans of tables in `plan` read (kept or filtered out), over all their loops. */
  const rowsRead = (plan: Node[]) =>
    plan.filter((n) => n['Relation Name']).reduce((sum, n) => sum + ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0)) * (n['Actual Loops'] ?? 1), 0);
  const nodes = (node: Node): Node[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

  /**
   * The plan a session of the engine makes for `text` under `settings` (for its transaction): prepared by name in
   * SQL and explained for `params`. With `grow`: planned first, then the tables grown by `grow`'s statements, then
   * the plan kept from before run (in a transaction rolled back), with the rows each of its nodes read.
   */
  async function preparedPlan(settings: string, text: string, params: unknown[], grow?: Array<[string, unknown[]]>): Promise<Node[]> {
    // A utility statement takes no bound parameters: the values written in (an array of NULLs untyped, as ARRAY[NULL] is text[]).
    const literal = (value: unknown): string =>
      Array.isArray(value)
        ? value.every((v) => v === null) ? `'{${value.map(() => 'NULL').join(',')}}'` : `ARRAY[${value.map(literal).join(', ')}]`
        : value === null
          ? 'NULL'
          : typeof value === 'number' || typeof value === 'boolean'
            ? String(value)
            : `'${String(value).replace(/'/g, "''")}'`;
    const explain = async (options: string) =>
      nodes(((await runner.query(`EXPLAIN (${options}) EXECUTE planned(${params.map(literal).join(', ')})`)) as Array<{ 'QUERY PLAN': Array<{ Plan: Node }> }>)[0]['QUERY PLAN'][0].Plan);
    const runner = core.db.dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      await runner.query(settings);
      await runner.query(`PREPARE planned AS ${toDialect(text, 'postgres')}`);
      const planned = await explain('FORMAT JSON');
      if (!grow) return planned;
      for (const [statement, values] of grow) await runner.query(toDialect(statement, 'postgres'), values);
      return await explain('FORMAT JSON, ANALYZE');
    } finally {
      await runner.rollbackTransaction();
      await runner.query('DEALLOCATE planned').catch(() => undefined); // a prepared statement outlives its transaction
      // The rows grown and rolled back still take pages, from which the next plan would count a larger table: given back.
      if (grow) await runner.query('VACUUM events, action_runs, executions, resource_snapshots');
      await runner.release();
    }
  }

  it("plans intake's lease of fresh events once, through indexes alone, even while its tables are a few rows", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const manager = core.db.manager;
    // One create in flight, in prj_1; three new events, in prj_1, prj_2 and prj_3.
    await creatingRuns(now, 1, 1, 4);
    await queryRows(manager, 'ANALYZE action_runs, events');

    const params = insertLeasingParams(taskEvents(3, 4), now);
    const planned = (settings: string) => preparedPlan(settings, insertLeasing, params);

    // A generic plan made on tables of a few rows reads them whole, and would for as long as it is kept.
    const plain = await planned("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)");
    expect(plain.map((n) => n['Node Type'])).toContain('Seq Scan');

    const plan = await planned(PLANNED_ONCE_BY_KEY);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    // Generic: made for any values. Every index it reads, it reads by key (not a walk from its start: no condition).
    const byKey = (n: Node) => n['Node Type'].includes('Index');
    expect(plan.filter((n) => byKey(n) && n['Index Cond'] === undefined)).toEqual([]);
    // A merge join only joins the batch to its leases (no table read in order to be merged).
    expect(plan.filter((n) => n['Node Type'] === 'Merge Join').flatMap((n) => nodes(n).slice(1)).filter((n) => n['Relation Name'])).toEqual([]);
    expect(plan.map((n) => n['Index Name'])).toEqual(expect.arrayContaining(['idx_action_runs_creating_in_flight', 'idx_events_waiting_resource', 'idx_action_runs_unfinished']));

    // And it leases what the custom plan would: every event, the one in the project with a create in flight held.
    type Inserted = { event_id: string; leased: boolean; held: boolean };
    const stored = await core.db.write((m) => plannedOnce<Inserted>(statementsOf(m), insertLeasing, params));
    expect(stored.map(({ event_id, leased, held }) => [event_id, leased, held]).sort()).toEqual([['evt-1', true, true], ['evt-2', true, false], ['evt-3', true, false]]);
    const leased = await queryRows<{ event_id: string }>(manager, `SELECT event_id FROM events WHERE lease_owner = 'me' ORDER BY event_id`);
    expect(leased.map(({ event_id }) => event_id)).toEqual(['evt-1', 'evt-2', 'evt-3']);
  });

  it("plans intake's lease once so that it finds a new event's waiting predecessors by its resource, however few waiting events the statistics counted", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    // Statistics taken when 3,000 events were done and none waited; planned then, run once 400 others wait.
    await processedEvents(now);
    const grow: Array<[string, unknown[]]> = [eventRows(now, { from: 5_001, to: 5_400, status: 'received', tag: 'busy-' })];
    const params = insertLeasingParams(taskEvents(32, 4, 10_001), now);
    const plan = await preparedPlan(PLANNED_ONCE_BY_KEY, insertLeasing, params, grow);
    // Planned from `status = 'received'`, it walked the index of events by status through all 400 for each new event.
    expect(plan.map((n) => n['Index Name']).filter((name) => name === 'idx_events_status_seq')).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(32 * 4);
    expect(plan.find((n) => n['Node Type'] === 'ModifyTable')?.['Actual Rows']).toBe(32);
  });

  it("plans the event claim once so that it finds a candidate's waiting predecessors by its resource, however few waiting events the statistics counted", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await processedEvents(now);
    const grow: Array<[string, unknown[]]> = [eventRows(now, { from: 5_001, to: 5_400, status: 'received', tag: 'busy-' })];
    const limit = 32;
    const plan = await preparedPlan(PLANNED_ONCE_BY_KEY, claimEventsSql('postgres', '?'), eventClaimParams(now, limit), grow);
    expect(plan.map((n) => n['Index Name']).filter((name) => name === 'idx_events_status_seq')).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(limit * 8);
    expect(plan.find((n) => n['Node Type'] === 'ModifyTable')?.['Actual Rows']).toBe(limit);
  });

  it('plans the action claim once, through indexes alone, and a plan made on a table of a few runs reads few runs of many', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const runs = (prefix: string, count: number, status: string) => [
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT '${prefix}-' || g, 'x-${prefix}-' || g, g, 'task:' || g, 'rule', 0, 'task.create', '${status}', 1, ?, ?, ? FROM generate_series(1, ${count}) g`,
      [now, now, now],
    ] as [string, unknown[]];
    // Planned while the table is three runs, one of them pending; run once it has 3,000 runs done and 40 pending.
    await queryRows(core.db.manager, ...runs('few', 3, 'succeeded'));
    await queryRows(core.db.manager, ...runs('one', 1, 'pending'));
    await queryRows(core.db.manager, 'ANALYZE action_runs');
    const grow = [runs('done', 3_000, 'succeeded'), runs('due', 40, 'pending')];
    const params = ['me', now, now, now, now, 32, now, now, 32, now, 32];
    const claim = (settings: string) => preparedPlan(settings, claimActionRunsSql(false), params, grow);
    const claimed = (plan: Node[]) => plan.find((n) => n['Node Type'] === 'ModifyTable')?.['Actual Rows'];

    // A generic plan made on three runs reads the grown table whole, for as long as it is kept.
    const plain = await claim("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)");
    expect(plain.map((n) => n['Node Type'])).toContain('Seq Scan');
    expect(rowsRead(plain)).toBeGreaterThan(3_000);

    const plan = await claim(PLANNED_ONCE_BY_KEY);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(200);
    // The same claim: 32 of the 41 runs pending.
    expect(claimed(plan)).toBe(32);
    expect(claimed(plain)).toBe(32);
  });

  it("plans intake's INSERT once, through indexes alone, and a plan made on tables of a few rows reads few rows of many", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const snapshots = (from: number, to: number): [string, unknown[]] => [
      `INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at) SELECT 'task:' || g, '{}', g, ? FROM generate_series(${from}, ${to}) g`,
      [now],
    ];
    // Planned on three snapshots; run once there are 20,000, for a batch of 32 events about tasks half of them known.
    await queryRows(core.db.manager, ...snapshots(1, 3));
    await queryRows(core.db.manager, 'ANALYZE resource_snapshots, events');
    const batch = Array.from({ length: 32 }, (_, i) => i * 1_000);
    const column = (value: unknown) => batch.map(() => value);
    const params = [
      now, now, batch.map((i) => `evt-${i}`), column('task.updated'), batch.map((i) => `task:${i}`), column(null), column(null),
      column('webhook'), column('{}'), column(0), column(null),
    ];
    const insert = (settings: string) => preparedPlan(settings, INSERT_MANY, params, [snapshots(4, 20_000)]);
    const inserted = (plan: Node[]) => plan.find((n) => n['Node Type'] === 'ModifyTable')?.['Actual Rows'];

    const plain = await insert("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)");
    expect(rowsRead(plain)).toBeGreaterThan(20_000);
    const plan = await insert(PLANNED_ONCE_BY_KEY);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(32 * 4);
    expect(inserted(plan)).toBe(32);
    expect(inserted(plain)).toBe(32);
  });

  it("plans intake's deciding INSERT once, through indexes alone: its checks of provenance read few rows of many", async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const known = (table: 'resource_snapshots' | 'resource_provenance', from: number, to: number): [string, unknown[]] => [
      table === 'resource_snapshots'
        ? `INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at) SELECT 'task:' || g, '{}', g, ? FROM generate_series(${from}, ${to}) g`
        : `INSERT INTO resource_provenance (resource_key, depth, action_run_id, rule_id, changed_at) SELECT 'task:' || g, 1, 'run-' || g, 'rule', ? FROM generate_series(${from}, ${to}) g`,
      [now],
    ];
    // Planned on three snapshots and provenances; run once there are 20,000 of each, for a batch of 32 events about
    // tasks, some of them known, half of them decided (the other half matched, evaluated, not decided).
    await queryRows(core.db.manager, ...known('resource_snapshots', 1, 3));
    await queryRows(core.db.manager, ...known('resource_provenance', 1, 3));
    await queryRows(core.db.manager, 'ANALYZE resource_snapshots, resource_provenance, events');
    const batch = Array.from({ length: 32 }, (_, i) => i * 1_000 + (i % 2));
    const column = (value: unknown) => batch.map(() => value);
    const decided = (value: unknown) => batch.map((_i, n) => (n % 2 === 0 ? value : null));
    const params = [
      now, now, batch.map((i) => `evt-${i}`), column('task.updated'), batch.map((i) => `task:${i}`), column(null), column(null),
      column('webhook'), column('{}'), column(0), column(null),
      decided('ignored'), decided(0), decided(false), decided('[]'), decided('{}'), column(false),
      now, 'me', now, 32,
    ];
    const grow = [known('resource_snapshots', 4, 20_000), known('resource_provenance', 4, 20_000)];
    const plan = await preparedPlan(PLANNED_ONCE_BY_KEY, insertDecidingSql(freshLeaseSql('postgres')), params, grow);

    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(plan.filter((n) => n['Relation Name'] === 'resource_provenance').length).toBeGreaterThan(0);
    expect(rowsRead(plan)).toBeLessThan(32 * 10);
    expect(plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'events')?.['Actual Rows']).toBe(32);
  });

  it('plans the event claim that follows an empty one once, through indexes alone, and a plan made on a few events reads few of many', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const events = (prefix: string, count: number, status: string) => eventRows(now, { to: count, status, tag: `${prefix}-` });
    // Planned while the table is three events, one of them waiting; run once it has 3,000 done and 40 waiting.
    await queryRows(core.db.manager, ...events('few', 3, 'processed'));
    await queryRows(core.db.manager, ...events('one', 1, 'received'));
    await queryRows(core.db.manager, 'ANALYZE events, action_runs');
    const limit = 32;
    const plan = await preparedPlan(PLANNED_ONCE_BY_KEY, claimEventsSql('postgres', '?'), eventClaimParams(now, limit), [
      events('done', 3_000, 'processed'),
      events('due', 40, 'received'),
    ]);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(rowsRead(plan)).toBeLessThan(500);
    // The same claim: 32 of the 41 waiting events.
    expect(plan.find((n) => n['Node Type'] === 'ModifyTable')?.['Actual Rows']).toBe(limit);
  });

  it('plans an event claim for its values after one that found events, and once per session after one that found none', async () => {
    const now = core.clock.now().toISOString();
    await queryRows(
      core.db.manager,
      `INSERT INTO events (event_id, type, resource_key, status, source, payload, seen_resource, received_at, next_attempt_at)
       SELECT 'evt-' || g, 'task.updated', 'task:' || g, 'received', 'webhook', '{}', TRUE, ?, ? FROM generate_series(1, 6) g`,
      [now, now],
    );
    // One transaction, so one session: its prepared statements say how each execution was planned.
    const counts = await core.db.write(async (manager) => {
      const sql = statementsOf(manager);
      const plans = async () => {
        const [row] = await sql.rows<{ generic: number; custom: number; mode: string }>(
          `SELECT COALESCE(SUM(generic_plans), 0)::int AS generic, COALESCE(SUM(custom_plans), 0)::int AS custom,
                  current_setting('plan_cache_mode') AS mode
           FROM pg_prepared_statements WHERE ltrim(statement) LIKE 'WITH barrier AS%'`,
        );
        return row;
      };
      const seen = [];
      expect(await core.queue.claimEventsIn(sql, 4)).toHaveLength(4); // the first claim of a process: for its values
      seen.push(await plans());
      expect(await core.queue.claimEventsIn(sql, 4)).toHaveLength(2); // after one that found events: for its values
      seen.push(await plans());
      expect(await core.queue.claimEventsIn(sql, 4)).toHaveLength(0); // the same, though that one found fewer than asked
      seen.push(await plans());
      expect(await core.queue.claimEventsIn(sql, 4)).toHaveLength(0); // after one that found none: once
      seen.push(await plans());
      expect(await core.queue.claimEventsIn(sql, 4)).toHaveLength(0);
      seen.push(await plans());
      return seen;
    });
    expect(counts).toEqual([
      { generic: 0, custom: 1, mode: 'force_custom_plan' },
      { generic: 0, custom: 2, mode: 'force_custom_plan' },
      { generic: 0, custom: 3, mode: 'force_custom_plan' },
      { generic: 1, custom: 3, mode: 'force_custom_plan' },
      { generic: 2, custom: 3, mode: 'force_custom_plan' },
    ]);
  });

  it('ends a batch of executions by key, their failed runs counted through their own index, on a table of a thousand', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const manager = core.db.manager;
    // A thousand executions with a run each, the last 25 running; one of those has a failed run besides.
    await queryRows(
      manager,
      `INSERT INTO executions (id, event_seq, event_id, rule_id, rule_version, status, conditions, rule_snapshot, created_at)
       SELECT 'x-' || g, g, 'evt-' || g, 'rule', 'v1', CASE WHEN g > 975 THEN 'running' ELSE 'succeeded' END, '[]', '{}', ? FROM generate_series(1, 1000) g`,
      [now],
    );
    await queryRows(
      manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'run-' || g, 'x-' || g, g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ? FROM generate_series(1, 1000) g
       UNION ALL SELECT 'run-f', 'x-980', 980, 'rule', 1, 'task.create', 'failed', 1, ?, ?, ?`,
      [now, now, now, now, now, now],
    );
    await queryRows(manager, 'ANALYZE action_runs, executions');
    const ids = Array.from({ length: 25 }, (_, i) => `x-${976 + i}`);
    const end = (settings: string) => preparedPlan(settings, FINISH_EXECUTIONS, [ids, ids, ids.map(() => now), ids], []);
    const scansOf = (plan: Node[]) => plan.filter((n) => n['Relation Name'] === 'executions').map((n) => n['Node Type']);

    // Planned for these values with the sessions' settings, it reads the table.
    const plain = await end("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)");
    expect(scansOf(plain)).toContain('Seq Scan');
    const plan = await end(PLANNED_ONCE_BY_KEY);
    expect(plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type))).toEqual([]);
    expect(plan.map((n) => n['Index Name'])).toContain('idx_action_runs_failed');
    expect(plan.map((n) => n['Index Name'])).not.toContain('idx_action_runs_execution');
    expect(rowsRead(plan)).toBeLessThan(100);
    // The 25 rows to update (a ModifyTable without RETURNING counts none itself).
    expect(rowsFed(plan[0])).toBe(25);
  });

  it('finds the runs in flight (creating ones, unfinished ones by resource) through their own indexes, not the index of runs by status', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    const manager = core.db.manager;
    await queryRows(
      manager,
      `INSERT INTO action_runs (id, execution_id, event_seq, resource_key, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at, scope_kind, scope_parent)
       SELECT 'run-' || g, 'x-' || g, g, 'task:' || g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ?, 'task', 'prj_1' FROM generate_series(1, 3000) g`,
      [now, now, now],
    );
    await queryRows(
      manager,
      `INSERT INTO events (event_id, type, resource_key, scope_kind, scope_parent, status, source, payload, received_at, next_attempt_at)
       SELECT 'evt-' || g, 'task.created', 'task:new-' || g, 'task', 'prj_1', 'processed', 'webhook', '{}', ?, ? FROM generate_series(1, 3000) g`,
      [now, now],
    );
    await queryRows(manager, 'ANALYZE action_runs, events');
    // After the statistics: a thousand creates in flight, and new events about unseen tasks in their project.
    await queryRows(manager, `UPDATE action_runs SET status = 'running', lease_owner = 'me', lease_until = '2026-11-27T00:01:00.000Z' WHERE event_seq > 2000`);
    await queryRows(manager, `UPDATE events SET status = 'received' WHERE seq > 2990`);

    const fresh = insertLeasingParams(taskEvents(10, 1, 5001), now);
    const plan = await planOf(insertLeasing, fresh);
    expect(plan).not.toContain('idx_action_runs_due');
    expect(plan).toContain('idx_action_runs_creating_in_flight');
    expect(plan).toContain('idx_action_runs_unfinished');
    const claim = await planOf(claimEventsSql('postgres', '?'), eventClaimParams(now, 32));
    expect(claim).not.toContain('idx_action_runs_due');
    expect(claim).toContain('idx_action_runs_creating_in_flight');

    // Whatever the statistics: without those two indexes, and with every other way made to look cheaper than a scan of
    // the table, no index of runs by status serves these conditions (the plain `status = 'running'`, or `IN`, went to
    // idx_action_runs_due).
    await queryRows(manager, 'DROP INDEX idx_action_runs_creating_in_flight');
    await queryRows(manager, 'DROP INDEX idx_action_runs_unfinished');
    for (const [sql, params] of [[insertLeasing, fresh], [claimEventsSql('postgres', '?'), eventClaimParams(now, 32)]] as const) {
      const forced = await core.db.dataSource.transaction(async (m) => {
        await queryRows(m, 'SET LOCAL enable_seqscan = off');
        const rows = await queryRows<{ 'QUERY PLAN': unknown }>(m, `EXPLAIN (FORMAT JSON) ${sql}`, [...params]);
        return JSON.stringify(rows[0]['QUERY PLAN']);
      });
      expect(forced).not.toContain('idx_action_runs_due');
    }
  });

  /**
   * What EXPLAIN ANALYZE found: how many rows the planner expected to read from `table` (where the join order comes
   * from), rows compared and thrown away by joins, and the most times a function scan (the batch's rows) ran.
   */
  async function joinWork(table: string, sql: string, params: unknown[]): Promise<{ updated: number; expected: number; discarded: number; functionScans: number }> {
    type Node = { 'Node Type': string; 'Relation Name'?: string; 'Plan Rows': number; 'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Join Filter'?: number; Plans?: Node[] };
    const rows = await queryRows<{ 'QUERY PLAN': Array<{ Plan: Node }> }>(core.db.manager, `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
    const work = { updated: 0, expected: 0, discarded: 0, functionScans: 0 };
    const visit = (node: Node): void => {
      work.discarded += (node['Rows Removed by Join Filter'] ?? 0) * node['Actual Loops'];
      if (node['Node Type'] === 'Function Scan') work.functionScans = Math.max(work.functionScans, node['Actual Loops']);
      if (node['Relation Name'] === table && node['Node Type'] !== 'ModifyTable') work.expected = Math.max(work.expected, node['Plan Rows']);
      for (const child of node.Plans ?? []) visit(child);
    };
    const top = rows[0]['QUERY PLAN'][0].Plan;
    visit(top);
    work.updated = top['Actual Rows'];
    return work;
  }

  describe('a batch of 256 joins its rows once, however few rows the statistics promise', () => {
    const now = '2026-11-27T00:00:00.000Z';
    const batch = Array.from({ length: 256 }, (_, i) => 2001 + i);
    const column = (value: unknown) => batch.map(() => value);

    // 20,000 rows: on a few thousand, the planner reads the whole table and hashes it, which hides the nested loop.
    beforeEach(async () => {
      const manager = core.db.manager;
      await queryRows(
        manager,
        `INSERT INTO events (event_id, type, status, source, payload, received_at, next_attempt_at)
         SELECT 'evt-' || g, 'task.updated', 'processed', 'webhook', '{}', ?, ? FROM generate_series(1, 20000) g`,
        [now, now],
      );
      await queryRows(
        manager,
        `INSERT INTO action_runs (id, execution_id, event_seq, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
         SELECT 'run-' || g, 'x-' || g, g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ? FROM generate_series(1, 20000) g`,
        [now, now, now],
      );
      await queryRows(
        manager,
        `INSERT INTO executions (id, event_seq, event_id, rule_id, rule_version, status, conditions, rule_snapshot, created_at)
         SELECT 'x-' || g, g, 'evt-' || g, 'rule', 'v1', 'succeeded', '[]', '{}', ? FROM generate_series(1, 20000) g`,
        [now],
      );
      await queryRows(manager, 'ANALYZE events, action_runs, executions');
      await queryRows(manager, `UPDATE events SET status = 'received', lease_owner = 'me' WHERE seq BETWEEN 2001 AND 2256`);
      await queryRows(manager, `UPDATE action_runs SET status = 'running', lease_owner = 'me' WHERE event_seq BETWEEN 2001 AND 2256`);
      await queryRows(manager, `UPDATE executions SET status = 'running' WHERE event_seq BETWEEN 2001 AND 2256`);
    });

    // `expected`: the rows to update, as the planner counted them (one, with guards against constants: the cause).
    it('when it finishes evaluated events', async () => {
      const work = await joinWork('events', FINISH_MANY, [
        column('processed'), column(0), column(false), column(null), column(now), column(0), column(now), column('[]'), batch, column('me'), batch,
      ]);
      expect(work).toEqual({ updated: 256, expected: expect.any(Number), discarded: expect.any(Number), functionScans: 1 });
      expect(work.expected).toBeGreaterThanOrEqual(128);
      expect(work.discarded).toBeLessThan(256);
    });

    it('when it records the outcomes of action runs', async () => {
      const ids = batch.map((seq) => `run-${seq}`);
      const work = await joinWork('action_runs', RECORD_MANY, [
        column('succeeded'), column(now), column(now), column(null), column(201), column(null), column(null), column(null), ids, column('me'), ids,
      ]);
      expect(work).toEqual({ updated: 256, expected: expect.any(Number), discarded: expect.any(Number), functionScans: 1 });
      expect(work.expected).toBeGreaterThanOrEqual(128);
      expect(work.discarded).toBeLessThan(256);
    });

    it('when it ends executions', async () => {
      const ids = batch.map((seq) => `x-${seq}`);
      const work = await joinWork('executions', FINISH_EXECUTIONS, [ids, ids, column(now), ids]);
      expect(work.expected).toBeGreaterThanOrEqual(128);
      expect(work.functionScans).toBe(1);
      expect(work.discarded).toBeLessThan(256);
      const ended = await queryRows<{ n: string }>(core.db.manager, `SELECT COUNT(*) AS n FROM executions WHERE status = 'succeeded' AND finished_at = ?`, [now]);
      expect(Number(ended[0].n)).toBe(256);
    });
  });
  describe("the outcome commit's first statement, planned once while the tables were a few rows, joins a batch of 256 by key", () => {
    const now = '2026-11-27T00:00:00.000Z';
    const batch = Array.from({ length: 256 }, (_, i) => 2001 + i);
    const column = (value: unknown) => batch.map(() => value);
    // Planned on three rows of each table; run once they have 20,000, 256 of them in flight.
    const rowsOf = (count: number, from = 1) => [
      [
        `INSERT INTO events (event_id, type, status, source, payload, received_at, next_attempt_at)
         SELECT 'evt-' || g, 'task.updated', 'processed', 'webhook', '{}', ?, ? FROM generate_series(${from}, ${count}) g`,
        [now, now],
      ],
      [
        `INSERT INTO action_runs (id, execution_id, event_seq, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
         SELECT 'run-' || g, 'x-' || g, g, 'rule', 0, 'task.create', 'succeeded', 1, ?, ?, ? FROM generate_series(${from}, ${count}) g`,
        [now, now, now],
      ],
      [
        `INSERT INTO executions (id, event_seq, event_id, rule_id, rule_version, status, conditions, rule_snapshot, created_at)
         SELECT 'x-' || g, g, 'evt-' || g, 'rule', 'v1', 'succeeded', '[]', '{}', ? FROM generate_series(${from}, ${count}) g`,
        [now],
      ],
    ] as Array<[string, unknown[]]>;
    const grow: Array<[string, unknown[]]> = [
      ...rowsOf(20_000, 4),
      [`UPDATE action_runs SET status = 'running', lease_owner = 'me' WHERE event_seq BETWEEN 2001 AND 2256`, []],
      [`UPDATE executions SET status = 'running' WHERE event_seq BETWEEN 2001 AND 2256`, []],
    ];
    beforeEach(async () => {
      for (const [statement, values] of rowsOf(3)) await queryRows(core.db.manager, statement, values);
      await queryRows(core.db.manager, 'ANALYZE events, action_runs, executions');
    });

    /** What a plan did: rows it updated (fed to the UPDATE), rows read, rows compared and thrown away by joins, the most runs of the batch's rows. */
    const work = (plan: Node[]) => ({
      updated: rowsFed(plan.find((n) => n['Node Type'] === 'ModifyTable')),
      read: rowsRead(plan),
      discarded: plan.reduce((sum, n) => sum + (n['Rows Removed by Join Filter'] ?? 0) * (n['Actual Loops'] ?? 1), 0),
      functionScans: Math.max(0, ...plan.filter((n) => n['Node Type'] === 'Function Scan').map((n) => n['Actual Loops'] ?? 0)),
      scans: plan.map((n) => n['Node Type']).filter((type) => /Seq Scan|Bitmap/.test(type)),
    });
    const plainGeneric = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)";

    it('when it records the outcomes of action runs', async () => {
      const ids = batch.map((seq) => `run-${seq}`);
      const params = [column('succeeded'), column(now), column(now), column(null), column(201), column(null), column(null), column(null), ids, column('me'), ids];
      // Without the settings, a plan made on three runs reads the 20,000 whole.
      expect(work(await preparedPlan(plainGeneric, RECORD_MANY, params, grow)).read).toBeGreaterThan(20_000);
      const planned = work(await preparedPlan(PLANNED_ONCE_BY_KEY, RECORD_MANY, params, grow));
      expect(planned).toEqual({ updated: 256, read: expect.any(Number), discarded: expect.any(Number), functionScans: 1, scans: [] });
      expect(planned.read).toBeLessThan(256 * 4);
      expect(planned.discarded).toBeLessThan(256);
    });

    it('when it ends executions, one of them with a failed run', async () => {
      const ids = batch.map((seq) => `x-${seq}`);
      const failed: [string, unknown[]] = [
        `INSERT INTO action_runs (id, execution_id, event_seq, rule_id, position, type, status, attempts, next_attempt_at, created_at, updated_at)
         VALUES ('run-f', 'x-2010', 2010, 'rule', 1, 'task.create', 'failed', 1, ?, ?, ?)`,
        [now, now, now],
      ];
      const params = [ids, ids, column(now), ids];
      const planned = work(await preparedPlan(PLANNED_ONCE_BY_KEY, FINISH_EXECUTIONS, params, [...grow, failed]));
      expect(planned).toEqual({ updated: 256, read: expect.any(Number), discarded: expect.any(Number), functionScans: 1, scans: [] });
      expect(planned.read).toBeLessThan(256 * 4);
      expect(planned.discarded).toBeLessThan(256);
    });

    it('and the statements after it are planned each time again, as the sessions plan', async () => {
      const settings = () => queryRows(core.db.manager, "SELECT current_setting('plan_cache_mode') AS plans, current_setting('enable_seqscan') AS seqscan");
      const before = await settings();
      const during = await core.db.write(async (m) => {
        const sql = statementsOf(m);
        planOnceByKey(sql);
        const once = await sql.rows("SELECT current_setting('plan_cache_mode') AS plans, current_setting('enable_seqscan') AS seqscan");
        planEachTime(sql);
        return [once, await sql.rows("SELECT current_setting('plan_cache_mode') AS plans, current_setting('enable_seqscan') AS seqscan")];
      });
      expect(during).toEqual([[{ plans: 'force_generic_plan', seqscan: 'off' }], before]);
      expect(before).toEqual([{ plans: 'force_custom_plan', seqscan: 'on' }]);
    });
  });
});
