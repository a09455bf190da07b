import { type MigrationInterface, type QueryRunner, TableColumn, TableIndex } from 'typeorm';

/**
 * `events.seen_resource`: the event is about no resource, or about one the
 * engine has a snapshot of (it has processed an event about it). Only events
 * about unseen resources wait behind the causal barrier; with the flag and a
 * partial index on it, the claim reaches the waiting events that need not wait
 * without scanning past those that must (the scan used to grow with the backlog).
 * Set when the event is stored, and when a snapshot of its resource appears.
 * (Two replicas racing can leave it false on an event about a resource just
 * seen: that event then waits as an unseen one would, which is safe.)
 */
export class SeenResource1764500000000 implements MigrationInterface {
  name = 'SeenResource1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn('events', new TableColumn({ name: 'seen_resource', type: 'boolean', default: false }));
    await queryRunner.query(
      `UPDATE events SET seen_resource = (resource_key IS NULL OR EXISTS (SELECT 1 FROM resource_snapshots s WHERE s.resource_key = events.resource_key))
       WHERE status = 'received'`,
    );
    await queryRunner.createIndex(
      'events',
      new TableIndex({ name: 'idx_events_waiting_seen', columnNames: ['seq'], where: "status = 'received' AND seen_resource" }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('events', 'idx_events_waiting_seen');
    await queryRunner.dropColumn('events', 'seen_resource');
  }
}
