/**
 * The statistics refresh analyzes a table again only once it has changed by
 * more than a tenth since its last ANALYZE (and 50 rows). A real server; the
 * change counters are read from pg_stat_user_tables, which the server updates
 * shortly after each transaction (hence the waits).
 */
import { Logger } from '@nestjs/common';
import { queryRows } from '../database/sql.js';
import { waitUntil } from '../wait.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { openCore, type Core } from '../../test/support/core.js';
import { refreshStaleStatistics, staleTables } from './statistics.js';

const postgres = (await databasesUnderTest('statistics refresh')).filter((kind) => kind.name === 'postgres');

beforeAll(() => Logger.overrideLogger(false));

describe.each(postgres)('statistics refresh on $name', (kind) => {
  let core: Core;
  beforeEach(async () => {
    core = await openCore(kind);
    // Only the refresh analyzes here: autovacuum, on its own schedule, would make the counts below race.
    await queryRows(core.db.manager, 'ALTER TABLE events SET (autovacuum_enabled = false)');
  });
  afterEach(() => core.close());

  /** Runs `sql` and has its connection report its changes to the statistics at once. */
  async function change(sql: string, params: unknown[] = []): Promise<void> {
    await core.db.dataSource.transaction(async (manager) => {
      await queryRows(manager, sql, params);
      await queryRows(manager, 'SELECT pg_stat_force_next_flush()');
    });
  }

  async function changedSinceAnalyze(): Promise<number> {
    const rows = await queryRows<{ n: string }>(core.db.manager, `SELECT n_mod_since_analyze AS n FROM pg_stat_user_tables WHERE relname = 'events' AND schemaname = current_schema()`);
    return Number(rows[0].n);
  }

  async function analyzedTimes(): Promise<number> {
    const rows = await queryRows<{ n: string }>(core.db.manager, `SELECT analyze_count + autoanalyze_count AS n FROM pg_stat_user_tables WHERE relname = 'events' AND schemaname = current_schema()`);
    return Number(rows[0].n);
  }

  it('analyzes a table that grew, and leaves it until a tenth of it has changed', async () => {
    const now = '2026-11-27T00:00:00.000Z';
    await change(
      `INSERT INTO events (event_id, type, status, source, payload, received_at, next_attempt_at)
       SELECT 'evt-' || g, 'task.updated', 'processed', 'webhook', '{}', ?, ? FROM generate_series(1, 2000) g`,
      [now, now],
    );
    await waitUntil(async () => (await changedSinceAnalyze()) >= 2000, { what: 'the insert to be counted' });
    const before = await analyzedTimes();
    expect(await refreshStaleStatistics(core.db.manager, ['events', 'executions'])).toEqual(['events']);
    expect(await analyzedTimes()).toBe(before + 1);
    expect(await staleTables(core.db.manager, ['events'])).toEqual([]);

    // 100 of 2,000 rows changed: under the threshold (50 + 200).
    await change(`UPDATE events SET attempts = 1 WHERE seq <= 100`);
    await waitUntil(async () => (await changedSinceAnalyze()) >= 100, { what: 'the update to be counted' });
    expect(await staleTables(core.db.manager, ['events'])).toEqual([]);
    expect(await refreshStaleStatistics(core.db.manager, ['events'])).toEqual([]);
    expect(await analyzedTimes()).toBe(before + 1);

    // 300 in all: over it.
    await change(`UPDATE events SET attempts = 2 WHERE seq > 100 AND seq <= 300`);
    await waitUntil(async () => (await changedSinceAnalyze()) >= 300, { what: 'the update to be counted' });
    expect(await refreshStaleStatistics(core.db.manager, ['events'])).toEqual(['events']);
    expect(await analyzedTimes()).toBe(before + 2);
  });
});
