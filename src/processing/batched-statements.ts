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

  queue(sql: string, params?: readonly unknown[]): Promise<void> {
    return this.sql.queue(sql, params);
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

/** `unnest(?::t1[], ?::t2[], …) AS t(c1, c2, …)` for an INSERT … SELECT. */
export function unnestOf(columns: readonly string[], types: readonly string[]): string {
  return `unnest(${types.map((type) => `?::${type}[]`).join(', ')}) AS t(${columns.join(', ')})`;
}
