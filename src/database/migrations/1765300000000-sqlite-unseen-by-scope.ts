import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SQLite: drops idx_events_waiting_unseen (waiting events about unseen
 * resources, by seq). Its claim now walks those events by causal scope through
 * idx_events_waiting_scope, as PostgreSQL's does (unseen-claim.ts), and nothing
 * else reads it there; every event paid for it twice, inserted when it arrived
 * and deleted when it was processed. PostgreSQL keeps it: its claim reads the
 * waiting unseen events before the causal barrier through it.
 */
export class SqliteUnseenByScope1765300000000 implements MigrationInterface {
  name = 'SqliteUnseenByScope1765300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_events_waiting_unseen');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') return;
    await queryRunner.query(`CREATE INDEX idx_events_waiting_unseen ON events (seq) WHERE status = 'received' AND NOT seen_resource`);
  }
}
