import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';

/**
 * The rows that hold a lease, for SQLite's start-up: it hands back the leases
 * a previous run of the engine held, and without these (small) indexes found
 * them by reading every waiting row (30 s with 200,000 events waiting).
 */
export class LeaseIndexes1764600000000 implements MigrationInterface {
  name = 'LeaseIndexes1764600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createIndex('events', new TableIndex({ name: 'idx_events_leased', columnNames: ['seq'], where: 'lease_owner IS NOT NULL' }));
    await queryRunner.createIndex('action_runs', new TableIndex({ name: 'idx_action_runs_leased', columnNames: ['id'], where: 'lease_owner IS NOT NULL' }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('action_runs', 'idx_action_runs_leased');
    await queryRunner.dropIndex('events', 'idx_events_leased');
  }
}
