import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Waiting events about unseen resources by causal scope (kind, parent) and
 * arrival. On PostgreSQL the claim visits the scopes that have such events one
 * index descent each and, in each, reads only the events received before the
 * oldest creating run in flight in that scope: the events that must wait behind
 * the causal barrier are never read (work-queue.ts, unseen-claim.ts). A NULL
 * kind or parent is indexed as '' so that one ordering covers every row.
 */
export class WaitingByScope1765100000000 implements MigrationInterface {
  name = 'WaitingByScope1765100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX idx_events_waiting_scope ON events ((COALESCE(scope_kind, '')), (COALESCE(scope_parent, '')), received_at, seq)
       WHERE status = 'received' AND NOT seen_resource`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX idx_events_waiting_scope');
  }
}
