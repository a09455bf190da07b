/**
 * PostgreSQL plans from statistics, and under a burst they are seconds old:
 * they may say no run is `running` while hundreds are. The batch UPDATE that
 * records outcomes (outcome-batch.ts) must still find its runs through the
 * primary key; planned from a plain `status = 'running'`, it walked the index
 * of runs by status through every running run (and every dead entry of one)
 * for each batch. So must the UPDATE that finishes a batch of evaluated
 * events (event-commit.ts), with the index of events by status. A real
 * server, statistics made stale on purpose.
 */
import { Logger } from '@nestjs/common';
import { queryRows } from '../database/sql.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, type Core } from '../../test/support/core.js';
import { FINISH_MANY } from './event-commit.js';
import { RECORD_MANY } from './outcome-batch.js';

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
      column('processed'), column(0), column(false), column(null), column(now), column(0), column(now), column('[]'), seqs, 'me', seqs,
    ]);
    expect(plan).not.toContain('idx_events_status_seq');
    expect(plan).toMatch(/"Index Cond":"\(seq = ANY/);
  });
});
