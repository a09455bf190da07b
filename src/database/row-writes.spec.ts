/**
 * Writing one row of a hot table builds no temporary table (SQLite). SQLite
 * tests a partial index's predicate and a CHECK constraint on every row
 * written, and a list of three or more constants (`IN ('a', 'b', 'c')`) is
 * tested through a temporary table built for the statement: with such a
 * predicate on idx_action_runs_unfinished, every new action run built one and
 * every recorded outcome two (migration 1765800000000). The statements here
 * are the plainest writes of each table, so whatever the schema adds to a
 * write shows in their programs. (That the statements reading unfinished runs
 * still go through that index: processing/runs-in-flight.spec.ts.)
 */
import { nullParams, useSqliteSchema } from '../../test/support/storage.js';
import { queryRows } from './sql.js';

interface Opcode {
  opcode: string;
}

/** A plain INSERT of every column and an UPDATE of each column by primary key, per hot table. */
function plainWrites(table: string, columns: string[], key: string): string[] {
  const insert = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`;
  return [insert, ...columns.filter((c) => c !== key).map((c) => `UPDATE ${table} SET ${c} = ? WHERE ${key} = ?`)];
}

describe('writing a row of a hot table (SQLite)', () => {
  const db = useSqliteSchema('row-writes-');

  async function columnsOf(table: string): Promise<string[]> {
    const rows = await queryRows<{ name: string }>(db().manager, `SELECT name FROM pragma_table_info('${table}')`);
    return rows.map((row) => row.name);
  }

  async function program(sql: string): Promise<string[]> {
    return (await queryRows<Opcode>(db().manager, `EXPLAIN ${sql}`, nullParams(sql))).map((op) => op.opcode);
  }

  it.each([
    ['events', 'seq'],
    ['executions', 'id'],
    ['action_runs', 'id'],
    ['resource_snapshots', 'resource_key'],
    ['resource_provenance', 'resource_key'],
  ])('%s: no INSERT or UPDATE of one row opens a temporary table', async (table, key) => {
    const writes = plainWrites(table, await columnsOf(table), key);
    expect(writes.length).toBeGreaterThan(3);
    const temporary: string[] = [];
    for (const sql of writes) if ((await program(sql)).includes('OpenEphemeral')) temporary.push(sql);
    expect(temporary).toEqual([]);
  });
});
