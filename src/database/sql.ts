/**
 * The few statements TypeORM's builders cannot say portably (insert-or-ignore
 * with RETURNING, claiming with SKIP LOCKED) are written once with `?`
 * placeholders and adapted to the database here.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { databaseKind, type DatabaseKind } from './data-source.js';

export function kindOf(dataSource: DataSource): DatabaseKind {
  return dataSource.options.type === 'postgres' ? 'postgres' : 'sqlite';
}

export function toDialect(sql: string, kind: DatabaseKind): string {
  if (kind === 'sqlite') return sql;
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** Runs a statement and returns its rows (RETURNING rows for writes) on either database. */
export async function queryRows<T = Record<string, unknown>>(
  manager: EntityManager,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const kind = kindOf(manager.connection);
  const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    const result = await runner.query(toDialect(sql, kind), params, true);
    return (result.records ?? []) as T[];
  } finally {
    if (!manager.queryRunner) await runner.release();
  }
}

/**
 * A NOT NULL column as a condition no index serves (`COALESCE` of it with
 * `empty`, a value of its type: the same value), nor any partial index whose
 * predicate tests the column, for statements that find their rows by key.
 * PostgreSQL plans from statistics, and those of a table that grew or churned
 * within seconds can say a status has almost no rows while it has thousands:
 * a plain `status = …` then walks the status's index (through every row of
 * that status and every dead entry of one since the last vacuum) instead of
 * probing the keys (young-statistics.spec.ts).
 */
export function unindexed(column: string, empty = "''"): string {
  return `COALESCE(${column}, ${empty})`;
}

/**
 * An event still waiting, as the statements that look for one about a resource write it (`alias`: `p.`, or none).
 * On PostgreSQL the predicate of idx_events_waiting_resource there (migration 1766000000000), which no other index
 * serves (the runs in flight are found the same way, processing/runs-in-flight.ts), and which is not `unindexed`:
 * statements that find events by key must not find them through it. As a plain `status = 'received'`, planned on
 * statistics taken while few events waited, intake's lease and the event claims walked the index of events by status
 * through every waiting event for each event they checked (54–115 rows read per event end to end in 8 of 17 runs of
 * the benchmark, against 20 in the others; young-statistics.spec.ts).
 */
export function waitingEvent(kind: DatabaseKind, alias = ''): string {
  return kind === 'postgres' ? `(${alias}status || '') = 'received'` : `${alias}status = 'received'`;
}

export { databaseKind };
