import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';

/**
 * Indexes for the claim statements: events waiting per resource (partial, so
 * they stay small however long the history), events by arrival time (the
 * causal barrier), and unfinished action runs per resource.
 */
export class ClaimIndexes1764300000000 implements MigrationInterface {
  name = 'ClaimIndexes1764300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createIndex(
      'events',
      new TableIndex({ name: 'idx_events_waiting_resource', columnNames: ['resource_key', 'seq'], where: "status = 'received'" }),
    );
    await queryRunner.createIndex('events', new TableIndex({ name: 'idx_events_received_at', columnNames: ['received_at', 'seq'] }));
    await queryRunner.createIndex(
      'action_runs',
      new TableIndex({
        name: 'idx_action_runs_unfinished',
        columnNames: ['resource_key', 'event_seq'],
        where: "status IN ('pending', 'running', 'retrying')",
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('action_runs', 'idx_action_runs_unfinished');
    await queryRunner.dropIndex('events', 'idx_events_received_at');
    await queryRunner.dropIndex('events', 'idx_events_waiting_resource');
  }
}
