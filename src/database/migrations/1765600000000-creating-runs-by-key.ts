import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_action_runs_creating_in_flight (scope kind, created_at; the creating
 * runs in flight, which the causal barrier reads) gets a predicate written
 * with the status `unindexed` (sql.ts): `COALESCE(status, '') = 'running'`,
 * the same test on a NOT NULL column. The barrier's subqueries say it the
 * same way (unseen-claim.ts `CREATING_IN_FLIGHT`), so this index serves them
 * and idx_action_runs_due (status, next_attempt_at) cannot. With the plain
 * `status = 'running'`, PostgreSQL, planning on statistics that said almost
 * no run was running, often walked idx_action_runs_due through every running
 * run and every dead entry of one since the last vacuum, once per new event
 * (up to 1.1 million index entries and 770,000 rows fetched in a 10 s run of
 * 13,600 events, 190 rows read per event; 64–76 in runs planned through this
 * index). SQLite matches the predicate by the same words.
 */
export class CreatingRunsByKey1765600000000 implements MigrationInterface {
  name = 'CreatingRunsByKey1765600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(
      `CREATE INDEX idx_action_runs_creating_in_flight ON action_runs (scope_kind, created_at)
       WHERE COALESCE(status, '') = 'running' AND scope_kind IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(
      `CREATE INDEX idx_action_runs_creating_in_flight ON action_runs (scope_kind, created_at) WHERE status = 'running' AND scope_kind IS NOT NULL`,
    );
  }
}
