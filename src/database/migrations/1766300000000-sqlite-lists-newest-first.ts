import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SQLite: the admin API lists executions and action runs newest first
 * (`GET /admin/executions`, `GET /admin/actions`: keyset pages on
 * (created_at, id)), and nothing indexed them in that order: a page without
 * a filter (and a page of runs by a common status) read and sorted the whole
 * table, 313 ms for executions and 456 ms for runs with 200,000 each, on the
 * event loop (better-sqlite3 answers synchronously), so intake and every
 * action waited as long. With these two indexes a page reads its rows and
 * stops. Both keys only grow, so each insert appends to the index's last page:
 * about 1.5 % more instructions an event end to end (callgrind, main thread,
 * 0.963–0.975 M against 0.934–0.967 M).
 *
 * The claims ask when the oldest create in flight was created
 * (`MIN(a.created_at)`); given idx_action_runs_created, SQLite, which keeps no
 * statistics, answered by walking it from the oldest run, +19 % instructions
 * an event, so those statements name idx_action_runs_creating_in_flight
 * (runs-in-flight.ts `oldestCreatingInFlight`).
 *
 * PostgreSQL has had idx_executions_created since 1766100000000; its lists of
 * runs sort in the server, beside the engine's work rather than in its way,
 * and an index there would take an entry at every run's insert and every
 * update of it (a run's updates are not HOT).
 */
export class SqliteListsNewestFirst1766300000000 implements MigrationInterface {
  name = 'SqliteListsNewestFirst1766300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('CREATE INDEX idx_executions_created ON executions (created_at, id)');
    await queryRunner.query('CREATE INDEX idx_action_runs_created ON action_runs (created_at, id)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_created');
    await queryRunner.query('DROP INDEX IF EXISTS idx_executions_created');
  }
}
