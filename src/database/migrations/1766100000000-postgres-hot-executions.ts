import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL: an execution's end (running to succeeded or failed) becomes a
 * heap-only (HOT) update, as the lease of an event did in 1765500000000. An
 * UPDATE writes no index entry when it changes no column that an index holds
 * or a partial index's predicate tests, and the new version finds room on the
 * row's page; otherwise it writes one in every index of the table. `status`
 * was in two: idx_executions_status (status, created_at) and the predicate of
 * idx_executions_waiting. So every execution's end wrote four index entries
 * (of the 35 an event cost end to end) and left four dead ones behind.
 *
 * On PostgreSQL no index of executions names `status` any more:
 *
 * - idx_executions_waiting (rule, debounce key) holds the executions whose
 *   `resume_at` is set, which are exactly the waiting ones (event-commit.ts
 *   inserts a waiting execution with its resume time and any other with none;
 *   step-records.ts sets it as an execution starts waiting and clears it as it
 *   resumes; every end clears it). An execution that never waits keeps
 *   `resume_at` NULL from its insert to its end, so its end changes no indexed
 *   value. The statements that look for waiting executions say both
 *   (waiting.ts), so that either database's index serves them.
 * - idx_executions_status gives way to idx_executions_created (created_at,
 *   id): the admin API lists executions newest first, filtered by status or
 *   not, by walking it (filtered by status as it goes; waiting ones through
 *   idx_executions_waiting). Before, a list without a filter read the whole
 *   table and sorted it.
 *
 * New pages of executions are filled to half, so that the end of an execution
 * finds room beside its row (its neighbours, inserted moments before, end
 * moments after); the old versions are pruned from the page once nobody can
 * see them. SQLite keeps its indexes: an update there rewrites the row's
 * entries in the indexes whose columns it changes, whatever else is indexed.
 */
export class PostgresHotExecutions1766100000000 implements MigrationInterface {
  name = 'PostgresHotExecutions1766100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_status');
    await queryRunner.query('CREATE INDEX idx_executions_created ON executions (created_at, id)');
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_waiting');
    await queryRunner.query('CREATE INDEX idx_executions_waiting ON executions (rule_id, debounce_key) WHERE resume_at IS NOT NULL');
    await queryRunner.query('ALTER TABLE executions SET (fillfactor = 50)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query('ALTER TABLE executions RESET (fillfactor)');
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_waiting');
    await queryRunner.query(`CREATE INDEX idx_executions_waiting ON executions (rule_id, debounce_key) WHERE status = 'waiting'`);
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_created');
    await queryRunner.query('CREATE INDEX idx_executions_status ON executions (status, created_at)');
  }
}
