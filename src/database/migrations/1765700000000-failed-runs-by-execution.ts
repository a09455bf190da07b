import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_action_runs_failed (execution id): the failed runs, by execution, which
 * the end of an execution counts (failed if any of its runs failed). Through
 * idx_action_runs_execution that count read every run of the execution, and
 * every entry of an earlier version of one (a run changes status three times:
 * about two entries per execution under load, on PostgreSQL 2.2 of the ~30
 * rows read per event end to end); here it reads the failed ones, almost
 * always none. The predicate tests `(status || '')`, as the statements that
 * count say it (processing/runs-in-flight.ts `FAILED_RUN`), so that no index
 * of runs by status serves them instead.
 */
const FAILED = `CREATE INDEX idx_action_runs_failed ON action_runs (execution_id) WHERE (status || '') = 'failed'`;

export class FailedRunsByExecution1765700000000 implements MigrationInterface {
  name = 'FailedRunsByExecution1765700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(FAILED);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_failed');
  }
}
