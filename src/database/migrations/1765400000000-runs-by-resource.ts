import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Drops idx_action_runs_resource (every action run by resource and event).
 * What reads action runs by resource reads only the unfinished ones (the
 * claim's per-resource order, the admin's "why is this event waiting"), and
 * idx_action_runs_unfinished, partial, serves them. Keyed on resource keys,
 * which arrive in no order, it cost every new run a page of its own in the
 * commit that created it (write-ahead log volume is most of a SQLite commit's
 * time).
 */
export class RunsByResource1765400000000 implements MigrationInterface {
  name = 'RunsByResource1765400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_resource');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('CREATE INDEX idx_action_runs_resource ON action_runs (resource_key, event_seq)');
  }
}
