/**
 * On PostgreSQL every statement is a round trip, and a batch of 32 evaluated
 * events used to cost some 150 of them. The rows of the commit's inserts are
 * gathered here instead and written with one `unnest()` statement per table
 * (the same statement whatever the batch size, so it stays prepared). Other
 * statements pass straight through.
 */
import type { Statements } from '../database/statements.js';

export interface Batched {
  /** The same rows as arrays, one per column, with their PostgreSQL array types. */
  text: string;
  types: readonly string[];
  /** Rows with the same key keep only the last (one ON CONFLICT statement may not touch a row twice). */
  keyOf?: (params: readonly unknown[]) => unknown;
}

export class BatchedStatements implements Statements {
  private readonly buffered = new Map<string, unknown[][]>();

  constructor(
    private readonly sql: Statements,
    private readonly batched: ReadonlyMap<string, Batched>,
  ) {}

  rows<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.sql.rows<T>(sql, params);
  }

  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    if (!this.batched.has(sql)) return this.sql.run(sql, params);
    let rows = this.buffered.get(sql);
    if (rows === undefined) this.buffered.set(sql, (rows = []));
    rows.push([...params]);
    return 1;
  }

  insertOne(sql: string, params?: readonly unknown[]): Promise<number | undefined> {
    return this.sql.insertOne(sql, params);
  }

  queue(sql: string, params?: readonly unknown[]): Promise<void> {
    return this.sql.queue(sql, params);
  }

  queueRows<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.sql.queueRows<T>(sql, params);
  }

  /**
   * Writes what was gathered, one statement per table, in the order the tables were first written; queued
   * (statements.ts `queue`): their outcome is the commit's.
   */
  async flush(): Promise<void> {
    for (const [sql, rows] of this.buffered) {
      const { text, types, keyOf } = this.batched.get(sql)!;
      const unique = keyOf ? [...new Map(rows.map((row) => [keyOf(row), row])).values()] : rows;
      await this.sql.queue(text, types.map((_type, column) => unique.map((row) => row[column] ?? null)));
    }
    this.buffered.clear();
  }
}

/** `unnest(?::t1[], ?::t2[], …) AS t(c1, c2, …)` for an INSERT … SELECT (`alias` instead of `t` when given). */
export function unnestOf(columns: readonly string[], types: readonly string[], alias = 't'): string {
  return `unnest(${types.map((type) => `?::${type}[]`).join(', ')}) AS ${alias}(${columns.join(', ')})`;
}

/**
 * The rows of a batch UPDATE (`UPDATE … FROM <this> WHERE <key> = t.<key> …`), with the values its guards compare to
 * as columns of `t` as well (`constants`: name → SQL literal, `{ was: "'received'" }`), so that every guard is written
 * against `t` (`e.status = t.was`, `e.lease_owner = t.owner`).
 *
 * PostgreSQL estimates a guard against a constant on an expression it has no statistics for at half a percent of the
 * rows: it counted one row to update where the batch had 256, and joined `t` to that one row as a nested loop that read
 * all of `t` again for each row it found, 65,280 rows compared for a batch of 256 events (60–220 ms a commit with a
 * backlog waiting, the server's busiest statement while it drained). Against a column of `t`, a guard belongs to the join:
 * the rows to update are counted as the keys (`= ANY`, the primary key), and the join is hashed or merged.
 * OFFSET 0 keeps the subquery whole (flattened, its constants would be constants again).
 */
export function guardedRowsOf(columns: readonly string[], types: readonly string[], constants: Readonly<Record<string, string>>): string {
  const named = Object.entries(constants).map(([name, literal]) => `${literal}::text AS ${name}`);
  return `(SELECT *, ${named.join(', ')} FROM ${unnestOf(columns, types)} OFFSET 0) t`;
}
