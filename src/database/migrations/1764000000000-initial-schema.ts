import { type MigrationInterface, type QueryRunner, Table, type TableColumnOptions } from 'typeorm';

/**
 * The first schema. Written with TypeORM's Table API rather than SQL so one
 * migration serves SQLite and PostgreSQL alike. Times are ISO-8601 strings in UTC:
 * they sort as text on both databases.
 */

const text = (name: string, nullable = false): TableColumnOptions => ({ name, type: 'text', isNullable: nullable });
const str = (name: string, length: number, nullable = false): TableColumnOptions => ({
  name,
  type: 'varchar',
  length: String(length),
  isNullable: nullable,
});
const int = (name: string, nullable = false, defaultValue?: number): TableColumnOptions => ({
  name,
  type: 'integer',
  isNullable: nullable,
  default: defaultValue,
});
const time = (name: string, nullable = false) => str(name, 30, nullable);
const lease = [str('lease_owner', 64, true), time('lease_until', true)];

function eventsTable(): Table {
  return new Table({
    name: 'events',
    columns: [
      { name: 'seq', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
      { ...str('event_id', 255), isUnique: true },
      str('type', 200),
      str('resource_key', 300, true),
      str('status', 20),
      str('source', 20),
      text('payload'),
      int('depth', false, 0),
      str('replay_of', 255, true),
      time('received_at'),
      time('processed_at', true),
      text('explanation', true),
      text('error', true),
      int('attempts', false, 0),
      time('next_attempt_at'),
      ...lease,
    ],
    indices: [
      { name: 'idx_events_status_seq', columnNames: ['status', 'seq'] },
      { name: 'idx_events_resource_seq', columnNames: ['resource_key', 'seq'] },
      { name: 'idx_events_type_seq', columnNames: ['type', 'seq'] },
    ],
  });
}

function executionsTable(): Table {
  return new Table({
    name: 'executions',
    columns: [
      { ...str('id', 36), isPrimary: true },
      int('event_seq'),
      str('event_id', 255),
      str('rule_id', 100),
      str('rule_version', 32),
      str('status', 20),
      text('conditions'),
      text('rule_snapshot'),
      text('error', true),
      time('created_at'),
      time('finished_at', true),
    ],
    indices: [
      { name: 'idx_executions_event', columnNames: ['event_seq'] },
      { name: 'idx_executions_rule', columnNames: ['rule_id', 'created_at'] },
      { name: 'idx_executions_status', columnNames: ['status', 'created_at'] },
    ],
  });
}

function actionRunsTable(): Table {
  return new Table({
    name: 'action_runs',
    columns: [
      { ...str('id', 36), isPrimary: true },
      str('execution_id', 36),
      int('event_seq'),
      str('resource_key', 300, true),
      str('rule_id', 100),
      int('position'),
      str('action_id', 100, true),
      str('type', 40),
      str('status', 20),
      int('attempts', false, 0),
      time('next_attempt_at'),
      ...lease,
      text('request', true),
      int('response_status', true),
      text('response', true),
      str('error_code', 100, true),
      text('error_message', true),
      time('created_at'),
      time('updated_at'),
    ],
    indices: [
      { name: 'idx_action_runs_due', columnNames: ['status', 'next_attempt_at'] },
      { name: 'idx_action_runs_execution', columnNames: ['execution_id', 'position'] },
      { name: 'idx_action_runs_resource', columnNames: ['resource_key', 'event_seq'] },
    ],
  });
}

function ruleStatesTable(): Table {
  return new Table({
    name: 'rule_states',
    columns: [{ ...str('rule_id', 100), isPrimary: true }, { name: 'enabled', type: 'boolean' }, time('updated_at')],
  });
}

function resourceSnapshotsTable(): Table {
  return new Table({
    name: 'resource_snapshots',
    columns: [{ ...str('resource_key', 300), isPrimary: true }, text('payload'), int('event_seq'), time('updated_at')],
  });
}

export class InitialSchema1764000000000 implements MigrationInterface {
  name = 'InitialSchema1764000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(eventsTable());
    await queryRunner.createTable(executionsTable());
    await queryRunner.createTable(actionRunsTable());
    await queryRunner.createTable(ruleStatesTable());
    await queryRunner.createTable(resourceSnapshotsTable());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['resource_snapshots', 'rule_states', 'action_runs', 'executions', 'events']) {
      await queryRunner.dropTable(table);
    }
  }
}
