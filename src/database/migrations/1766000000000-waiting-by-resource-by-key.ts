import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PostgreSQL: idx_events_waiting_resource (resource_key, seq) holds the waiting
 * events, as before, but under a predicate that tests `(status || '')`, the
 * same value, as the statements that look for a resource's waiting events
 * write it (sql.ts `waitingEvent`; the runs in flight got theirs in
 * 1765600000000), so that the index of events by status cannot serve them. Intake's lease of new events and the
 * event claims check, for each event, whether an earlier one about its
 * resource still waits; planned on statistics taken while few events waited
 * (they are seconds old under a burst), the planner found `status = 'received'`
 * as cheap through idx_events_status_seq as through this index, and walked
 * every waiting event (and every dead entry of one) for each event checked: in
 * half the benchmark's runs, 65 rows read per event end to end instead of 20.
 * SQLite keeps the plain predicate (its statements name the index).
 */
const WAITING_RESOURCE = 'CREATE INDEX idx_events_waiting_resource ON events (resource_key, seq)';

export class WaitingByResourceByKey1766000000000 implements MigrationInterface {
  name = 'WaitingByResourceByKey1766000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_events_waiting_resource');
    await queryRunner.query(`${WAITING_RESOURCE} WHERE (status || '') = 'received'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    await queryRunner.query('DROP INDEX IF EXISTS idx_events_waiting_resource');
    await queryRunner.query(`${WAITING_RESOURCE} WHERE status = 'received'`);
  }
}
