import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The rate budget replicas share on PostgreSQL (actions/shared-rate-budget.ts):
 * `rate_budget`, one row whose lock orders the grants and which holds a pause
 * every replica obeys, and `rate_budget_grants`, the slices of the budget
 * replicas have leased. Times are milliseconds since the epoch on the
 * database's clock. Made on SQLite too, where the engine keeps its budget in
 * process, so both databases have one schema.
 */
export class SharedRateBudget1764900000000 implements MigrationInterface {
  name = 'SharedRateBudget1764900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const postgres = queryRunner.connection.options.type === 'postgres';
    await queryRunner.query('CREATE TABLE rate_budget (id integer PRIMARY KEY, paused_until double precision)');
    await queryRunner.query('INSERT INTO rate_budget (id, paused_until) VALUES (1, NULL)');
    const id = postgres ? 'id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY' : 'id integer PRIMARY KEY AUTOINCREMENT';
    await queryRunner.query(
      `CREATE TABLE rate_budget_grants (${id}, replica varchar(100) NOT NULL, granted_at double precision NOT NULL, slots integer NOT NULL)`,
    );
    await queryRunner.query('CREATE INDEX idx_rate_budget_grants_granted_at ON rate_budget_grants (granted_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE rate_budget_grants');
    await queryRunner.query('DROP TABLE rate_budget');
  }
}
