/**
 * The statements that wait for unfinished runs say it in the words of
 * idx_action_runs_unfinished's predicate (runs-in-flight.ts), so SQLite, which
 * matches a partial index by the words of its predicate, reads them through
 * it. So do those that ask for the oldest create in flight, through
 * idx_action_runs_creating_in_flight, which they name (SQLite walked the
 * index of runs by age for them otherwise, migration 1766300000000).
 * (PostgreSQL's plans: young-statistics.spec.ts.)
 */
import { sqlitePlan, useSqliteSchema } from '../../test/support/storage.js';
import { UNFINISHED_RUN } from './runs-in-flight.js';
import { claimEventsSql } from './work-queue.js';

describe('unfinished runs, read through their partial index (SQLite)', () => {
  const db = useSqliteSchema('runs-in-flight-');

  const planOf = (sql: string) => sqlitePlan(db(), sql);

  it('the event claim', async () => {
    expect(await planOf(claimEventsSql('sqlite', '32'))).toContain('USING INDEX idx_action_runs_unfinished');
  });

  it('the event claim reads creates in flight through their own index only, never the index of every run by age', async () => {
    const plan = await planOf(claimEventsSql('sqlite', '32'));
    expect(plan).toContain('USING INDEX idx_action_runs_creating_in_flight');
    expect(plan).not.toContain('idx_action_runs_created');
  });

  it('a lookup of the runs unfinished on a resource', async () => {
    const sql = `SELECT a.id FROM action_runs a WHERE a.resource_key = ? AND a.event_seq < ? AND ${UNFINISHED_RUN}`;
    expect(await planOf(sql)).toContain('USING INDEX idx_action_runs_unfinished');
  });
});
