import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';

/** Rules managed through the admin API. */
export class ApiRules1764100000000 implements MigrationInterface {
  name = 'ApiRules1764100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'api_rules',
        columns: [
          { name: 'rule_id', type: 'varchar', length: '100', isPrimary: true },
          { name: 'definition', type: 'text' },
          { name: 'created_at', type: 'varchar', length: '30' },
          { name: 'updated_at', type: 'varchar', length: '30' },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('api_rules');
  }
}
