import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_executions_throttle (rule, throttle key, created_at) holds only the
 * executions that have a throttle key: the throttle's count is its one reader
 * (processing/event-commit.ts `THROTTLE_COUNT`), and it always asks for a
 * key (`throttle_key = ?`, which both planners know excludes NULL). Every
 * execution of a rule without a throttle, most of them, paid for an entry
 * of the index that nothing would read.
 */
const THROTTLE = 'CREATE INDEX idx_executions_throttle ON executions (rule_id, throttle_key, created_at)';

export class ThrottleKeysOnly1765900000000 implements MigrationInterface {
  name = 'ThrottleKeysOnly1765900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_throttle');
    await queryRunner.query(`${THROTTLE} WHERE throttle_key IS NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_throttle');
    await queryRunner.query(THROTTLE);
  }
}
