import { type MigrationInterface, type QueryRunner, TableColumn, TableIndex } from 'typeorm';
import { scopeOfEvent } from '../../causal-scope.js';

/**
 * The causal barrier's scopes (causal-scope.ts): `scope_kind`/`scope_parent`
 * on events (what could have caused them) and on action runs (what a creating
 * request could create). The claim checks an unseen event's scope against the
 * in-flight creating runs through a partial index that holds only those (a
 * few rows, however large the tables), and reaches the waiting unseen events
 * through one of their own.
 *
 * Waiting events are given their scope here. Runs already in flight keep none:
 * a run in flight during an upgrade holds nothing back (at worst one extra
 * link in a chain, as after a timed-out attempt; README, Guarantees).
 */
export class CausalScopes1764700000000 implements MigrationInterface {
  name = 'CausalScopes1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['events', 'action_runs']) {
      await queryRunner.addColumns(table, [
        new TableColumn({ name: 'scope_kind', type: 'varchar', length: '40', isNullable: true }),
        new TableColumn({ name: 'scope_parent', type: 'varchar', length: '300', isNullable: true }),
      ]);
    }
    await queryRunner.createIndex(
      'action_runs',
      new TableIndex({ name: 'idx_action_runs_creating_in_flight', columnNames: ['scope_kind', 'created_at'], where: "status = 'running' AND scope_kind IS NOT NULL" }),
    );
    await queryRunner.createIndex(
      'events',
      new TableIndex({ name: 'idx_events_waiting_unseen', columnNames: ['seq'], where: "status = 'received' AND NOT seen_resource" }),
    );
    await backfillWaitingEvents(queryRunner);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('events', 'idx_events_waiting_unseen');
    await queryRunner.dropIndex('action_runs', 'idx_action_runs_creating_in_flight');
    for (const table of ['events', 'action_runs']) {
      await queryRunner.dropColumn(table, 'scope_parent');
      await queryRunner.dropColumn(table, 'scope_kind');
    }
  }
}

async function backfillWaitingEvents(queryRunner: QueryRunner): Promise<void> {
  const postgres = queryRunner.connection.options.type === 'postgres';
  const rows = (await queryRunner.query(
    `SELECT seq, resource_key, payload FROM events WHERE status = 'received' AND resource_key IS NOT NULL AND NOT seen_resource`,
  )) as Array<{ seq: number; resource_key: string; payload: string }>;
  for (const row of rows) {
    let data: unknown;
    try {
      data = (JSON.parse(row.payload) as { data?: unknown }).data;
    } catch {
      data = undefined;
    }
    const scope = scopeOfEvent(row.resource_key, data);
    if (scope === null) continue;
    const sql = postgres
      ? 'UPDATE events SET scope_kind = $1, scope_parent = $2 WHERE seq = $3'
      : 'UPDATE events SET scope_kind = ?, scope_parent = ? WHERE seq = ?';
    await queryRunner.query(sql, [scope.kind, scope.parent, row.seq]);
  }
}
