import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';

/**
 * The engine processes ("replicas") that share this database
 * (processing/replicas.ts): each registers at start with the lease owner id of
 * its work queue, heartbeats, and is marked `stopped_at` when it stops
 * gracefully or `dead_at` when the others saw its heartbeat stop (they then
 * take its work back at once). Times are ISO-8601 strings in UTC, as elsewhere.
 * Made on SQLite too, where it holds the one process of the file (and the
 * earlier runs of it), so both databases have one schema.
 */
export class Replicas1764800000000 implements MigrationInterface {
  name = 'Replicas1764800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const time = (name: string, isNullable = false) => ({ name, type: 'varchar', length: '30', isNullable });
    const count = (name: string) => ({ name, type: 'bigint', isNullable: false, default: 0 });
    await queryRunner.createTable(
      new Table({
        name: 'replicas',
        columns: [
          { name: 'id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'host', type: 'varchar', length: '255' },
          { name: 'pid', type: 'integer' },
          { name: 'version', type: 'varchar', length: '40' },
          time('started_at'),
          time('heartbeat_at'),
          time('stopped_at', true),
          time('dead_at', true),
          count('events_done'),
          count('action_runs_done'),
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('replicas');
  }
}
