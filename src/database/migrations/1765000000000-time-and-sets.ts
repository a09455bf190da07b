import { type MigrationInterface, type QueryRunner, TableColumn, TableIndex } from 'typeorm';

/**
 * Time and sets in rules (SPEC section 11). Executions can wait (`resume_at`),
 * be stopped by a check, cancelled by an event (`cancelled_by`) or debounced
 * into a later execution (`debounce_key`, `debounced_into`), and keep the
 * values of the facts their rule's conditions used (`facts`, for `facts.<name>`
 * in templates of later steps). An action run may be one item of a forEach
 * (`item_index`, `item`). An event lists the executions it cancelled.
 *
 * A delay is an action run of type `delay` due at its resume time: it is
 * claimed like any other work when due, so waiting holds no worker, no timer
 * and no memory. Two partial indexes find an execution's rivals fast: waiting
 * executions by rule (cancel-on, debounce).
 */
export class TimeAndSets1765000000000 implements MigrationInterface {
  name = 'TimeAndSets1765000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns('executions', [
      new TableColumn({ name: 'resume_at', type: 'varchar', length: '30', isNullable: true }),
      new TableColumn({ name: 'cancelled_by', type: 'varchar', length: '255', isNullable: true }),
      new TableColumn({ name: 'debounce_key', type: 'varchar', length: '300', isNullable: true }),
      new TableColumn({ name: 'debounced_into', type: 'varchar', length: '36', isNullable: true }),
      new TableColumn({ name: 'facts', type: 'text', isNullable: true }),
    ]);
    await queryRunner.addColumns('action_runs', [
      new TableColumn({ name: 'item_index', type: 'integer', isNullable: true }),
      new TableColumn({ name: 'item', type: 'text', isNullable: true }),
    ]);
    await queryRunner.addColumn('events', new TableColumn({ name: 'cancelled', type: 'text', isNullable: true }));
    await queryRunner.createIndex(
      'executions',
      new TableIndex({ name: 'idx_executions_waiting', columnNames: ['rule_id', 'debounce_key'], where: "status = 'waiting'" }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('executions', 'idx_executions_waiting');
    await queryRunner.dropColumn('events', 'cancelled');
    for (const column of ['item', 'item_index']) await queryRunner.dropColumn('action_runs', column);
    for (const column of ['facts', 'debounced_into', 'debounce_key', 'cancelled_by', 'resume_at']) await queryRunner.dropColumn('executions', column);
  }
}
