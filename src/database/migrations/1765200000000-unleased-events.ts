import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';

/**
 * Waiting events that nobody holds, by when they are due. Intake's commit
 * leases most new events to its own process (event-writer.ts), so this index
 * holds only the events that wait for a claim; the event loop probes it before
 * claiming (work-queue.ts `anyClaimable`), and a wake-up with nothing to claim
 * costs one index descent instead of the claim's scans.
 */
export class UnleasedEvents1765200000000 implements MigrationInterface {
  name = 'UnleasedEvents1765200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createIndex(
      'events',
      new TableIndex({ name: 'idx_events_unleased', columnNames: ['next_attempt_at'], where: "status = 'received' AND lease_owner IS NULL" }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('events', 'idx_events_unleased');
  }
}
