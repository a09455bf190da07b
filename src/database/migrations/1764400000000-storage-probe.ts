import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One row the engine rewrites to find out whether the database takes writes
 * again after a storage fault (database.service.ts): a write that changes
 * nothing proves nothing on a full disk.
 */
export class StorageProbe1764400000000 implements MigrationInterface {
  name = 'StorageProbe1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('CREATE TABLE storage_probe (id integer PRIMARY KEY, written_at varchar(30) NOT NULL)');
    await queryRunner.query("INSERT INTO storage_probe (id, written_at) VALUES (1, '')");
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE storage_probe');
  }
}
