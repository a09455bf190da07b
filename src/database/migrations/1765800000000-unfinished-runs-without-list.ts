import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_action_runs_unfinished's predicate says "pending, running or retrying"
 * as three comparisons joined by OR instead of `IN ('pending', 'running',
 * 'retrying')`, and the statements that read it say it the same way
 * (processing/runs-in-flight.ts `UNFINISHED_RUN`).
 *
 * Why: SQLite tests a list of three or more constants by building a temporary
 * table of them, and it tests a partial index's predicate on every row
 * written: with the list, each new action run built one (its INSERT) and each
 * recorded outcome two (the row before and after its UPDATE). That is three
 * temporary tables an event end to end, each with a page cache of its own to
 * create, zero and drop: about 4 µs of 7.6 for an INSERT and UPDATE of a run
 * on a table with only this index, and some 5 % of the engine's instructions
 * per event (docs/performance-log.md). Comparisons cost none of that. PostgreSQL
 * gets the same words, so that one statement text serves both databases and
 * its planner matches the predicate as before (young-statistics.spec.ts).
 */
const UNFINISHED = 'CREATE INDEX idx_action_runs_unfinished ON action_runs (resource_key, event_seq)';

export class UnfinishedRunsWithoutList1765800000000 implements MigrationInterface {
  name = 'UnfinishedRunsWithoutList1765800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_unfinished');
    await queryRunner.query(`${UNFINISHED} WHERE ((status || '') = 'pending' OR (status || '') = 'running' OR (status || '') = 'retrying')`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_unfinished');
    await queryRunner.query(`${UNFINISHED} WHERE (status || '') IN ('pending', 'running', 'retrying')`);
  }
}
