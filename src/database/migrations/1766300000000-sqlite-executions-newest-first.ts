import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SQLite: the admin API lists executions newest first (`GET /admin/executions`,
 * keyset pages on (created_at, id)), and nothing indexed them in that order: a
 * page without a filter read and sorted the whole table (313 ms with 200,000
 * executions) on the event loop, since better-sqlite3 answers synchronously,
 * so intake and every action waited as long. With idx_executions_created a
 * page reads its rows and stops. Its key only grows, so each insert appends
 * to the index's last page: about 1 % more instructions per event end to end
 * (callgrind, 0.960 M against 0.949 M, within the counts' own spread).
 * PostgreSQL has had it since 1766100000000.
 *
 * Action runs get no such index: one on (created_at, id) became the plan of
 * the claims' oldest creating run in flight (`MIN(a.created_at)`, a walk of
 * every run from the oldest instead of the partial index of creates in
 * flight), +19 % instructions per event. Their list without a filter still
 * sorts the table (README, Known limits).
 */
export class SqliteExecutionsNewestFirst1766300000000 implements MigrationInterface {
  name = 'SqliteExecutionsNewestFirst1766300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('CREATE INDEX idx_executions_created ON executions (created_at, id)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_created');
  }
}
