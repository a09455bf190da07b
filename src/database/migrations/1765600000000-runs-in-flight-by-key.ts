import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The two partial indexes of action runs in flight get predicates that test
 * `(status || '')`, the same value, and the statements that read them say it
 * the same way (processing/runs-in-flight.ts), so that these indexes serve
 * them and idx_action_runs_due (status, next_attempt_at) cannot:
 *
 * - idx_action_runs_creating_in_flight (scope kind, created_at), the creating
 *   runs in flight, which the causal barrier reads (`CREATING_IN_FLIGHT`);
 * - idx_action_runs_unfinished (resource key, event seq), the unfinished runs
 *   by resource, which per-resource ordering reads (`UNFINISHED_RUN`).
 *
 * With the plain `status = 'running'` (or `IN (…)`), PostgreSQL, planning on
 * statistics that said almost no run was running, often walked
 * idx_action_runs_due through every unfinished run and every dead entry of one
 * since the last vacuum, once per new event: up to 1.1 million index entries
 * read and 770,000 rows fetched in a 10 s run of 13,600 events (190 rows read
 * per event end to end, against 60 in runs planned through these indexes).
 * SQLite matches the predicates by the same words.
 */
const CREATING = `CREATE INDEX idx_action_runs_creating_in_flight ON action_runs (scope_kind, created_at)`;
const UNFINISHED = `CREATE INDEX idx_action_runs_unfinished ON action_runs (resource_key, event_seq)`;

export class RunsInFlightByKey1765600000000 implements MigrationInterface {
  name = 'RunsInFlightByKey1765600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(`${CREATING} WHERE (status || '') = 'running' AND scope_kind IS NOT NULL`);
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_unfinished');
    await queryRunner.query(`${UNFINISHED} WHERE (status || '') IN ('pending', 'running', 'retrying')`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_creating_in_flight');
    await queryRunner.query(`${CREATING} WHERE status = 'running' AND scope_kind IS NOT NULL`);
    await queryRunner.query('DROP INDEX IF EXISTS idx_action_runs_unfinished');
    await queryRunner.query(`${UNFINISHED} WHERE status IN ('pending', 'running', 'retrying')`);
  }
}
