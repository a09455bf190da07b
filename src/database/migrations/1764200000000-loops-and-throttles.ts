import { type MigrationInterface, type QueryRunner, Table, TableColumn, TableIndex } from 'typeorm';

/** Provenance of resources the engine created or changed (loop protection), and throttle keys. */
export class LoopsAndThrottles1764200000000 implements MigrationInterface {
  name = 'LoopsAndThrottles1764200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'resource_provenance',
        columns: [
          { name: 'resource_key', type: 'varchar', length: '300', isPrimary: true },
          { name: 'depth', type: 'integer' },
          { name: 'action_run_id', type: 'varchar', length: '36' },
          { name: 'rule_id', type: 'varchar', length: '100' },
          { name: 'changed_at', type: 'varchar', length: '30' },
        ],
        indices: [{ name: 'idx_provenance_changed', columnNames: ['changed_at'] }],
      }),
    );
    await queryRunner.addColumn('executions', new TableColumn({ name: 'throttle_key', type: 'varchar', length: '300', isNullable: true }));
    await queryRunner.createIndex('executions', new TableIndex({ name: 'idx_executions_throttle', columnNames: ['rule_id', 'throttle_key', 'created_at'] }));
    await queryRunner.addColumn('events', new TableColumn({ name: 'self_caused', type: 'boolean', default: false }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn('events', 'self_caused');
    await queryRunner.dropIndex('executions', 'idx_executions_throttle');
    await queryRunner.dropColumn('executions', 'throttle_key');
    await queryRunner.dropTable('resource_provenance');
  }
}
