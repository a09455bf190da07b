import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * idx_executions_debounced_into (debounced_into) holds the executions that a
 * debounce collapsed into a later one. When the next event of a burst comes,
 * the earlier collapsed executions are pointed at the newest
 * (waiting.ts `DEBOUNCE_REPOINT`, `WHERE debounced_into = ?`); without an
 * index both databases read every execution to find them, once per event of
 * a debounced rule, so a burst cost more the longer the engine had run. Only
 * debounced executions have an entry: every other insert and update of the
 * table leaves the index alone (an execution's end stays HOT on PostgreSQL,
 * 1766100000000). Both planners know `debounced_into = ?` excludes NULL.
 */
const DEBOUNCED_INTO = 'CREATE INDEX idx_executions_debounced_into ON executions (debounced_into) WHERE debounced_into IS NOT NULL';

export class DebouncedBySuccessor1766200000000 implements MigrationInterface {
  name = 'DebouncedBySuccessor1766200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(DEBOUNCED_INTO);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_debounced_into');
  }
}
