import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_action_runs_creating_in_flight holds the creating runs in flight by
 * age alone (created_at), no longer by scope kind first. The causal barrier
 * asks for the oldest of them all (`MIN(created_at)`), which on (scope kind,
 * created_at) was a read of every entry, dead ones included: PostgreSQL read
 * it through a bitmap, which never marks an entry whose row is gone, about 130
 * entries per event claim under load. By age, the oldest is the first live
 * entry. The lookups of one scope's oldest (scope kind, parent, live lease)
 * walk the same order and stop at the first that matches: the creating runs
 * in flight are as many as the actions in flight at most. Same predicate
 * (runs-in-flight.ts `CREATING_IN_FLIGHT`), both databases.
 */
const PREDICATE = `WHERE (status || '') = 'running' AND scope_kind IS NOT NULL`;

export class CreatingRunsByAge1765700000000 implements MigrationInterface {
  name = 'CreatingRunsByAge1765700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(`CREATE INDEX idx_action_runs_creating_in_flight ON action_runs (created_at) ${PREDICATE}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(`CREATE INDEX idx_action_runs_creating_in_flight ON action_runs (scope_kind, created_at) ${PREDICATE}`);
  }
}
