/**
 * The hot path's way to the database: plain SQL on the driver's own
 * connection, each statement prepared once. TypeORM stays for the schema, the
 * migrations and the admin side; for the few statements every event and every
 * action run pays for, its query building, parameter escaping and result
 * mapping cost more than the database does.
 *
 * Inside `Database.write` the statements run on the transaction's connection
 * (TypeORM still opens and commits it, so the write path's locking, durability
 * and storage-fault handling stay in one place). On SQLite a statement is
 * prepared once per connection (better-sqlite3's Statement); on PostgreSQL it
 * is a named statement, which pg prepares once per pooled connection.
 * Statements are written with `?` placeholders and adapted to the database.
 */
import { createHash } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { kindOf, toDialect } from './sql.js';
import { arrayParameterTypes, pgParameter } from './pg-parameters.js';

export interface Statements {
  /** Rows of a SELECT, or of a write's RETURNING. */
  rows<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** A write without RETURNING; the number of rows it changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /**
   * SQLite: an INSERT of one row, without RETURNING; the new row's rowid, or undefined when it stored nothing (ON
   * CONFLICT … DO NOTHING). SQLite gathers a RETURNING clause's rows apart: on intake's INSERT of an event it cost
   * 8 µs of 20. PostgreSQL has no rowid: there a write returns what it needs (`rows`).
   */
  insertOne(sql: string, params?: readonly unknown[]): Promise<number | undefined>;
  /**
   * A write whose outcome nothing reads but the commit. On PostgreSQL, in a
   * transaction of `Database.write` (transactions.ts), it is sent at once and
   * not waited for: it travels behind the statements before it and ahead of
   * the COMMIT, and if it fails, so does the commit. Elsewhere it is `run`.
   */
  queue(sql: string, params?: readonly unknown[]): Promise<void>;
  /**
   * The rows of the last statement of a transaction of `Database.write`, sent as `queue` sends it: on PostgreSQL the
   * COMMIT then leaves in the same write, and the rows arrive before its answer, one round trip for both instead of
   * two. The transaction's work returns without waiting for them; if the statement fails, so does the commit.
   * Elsewhere it is `rows`.
   */
  queueRows<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
}

interface SqliteStatement {
  reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
}
interface PgResult {
  rows: unknown[];
  rowCount: number | null;
}
interface PgQueryable {
  query(config: { name: string; text: string; values: unknown[] }): Promise<PgResult>;
}

const prepared = new WeakMap<SqliteConnection, Map<string, SqliteStatement>>();
/** PostgreSQL: the statements queued in each session's open transaction, not yet known to have succeeded. */
const pipelines = new WeakMap<object, Array<Promise<unknown>>>();
/** A statement as the hot path sends it: its prepared name, its text in PostgreSQL's dialect, its array parameters' element types. */
interface PgStatement {
  name: string;
  text: string;
  elementTypes: ReturnType<typeof arrayParameterTypes>;
}
const pgNames = new Map<string, PgStatement>();

/** better-sqlite3 binds numbers, strings, bigints, buffers and null only. */
function sqliteValue(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

/** The parameters as better-sqlite3 takes them: the same array when no value needs changing, a changed copy otherwise. */
function sqliteParams(params: readonly unknown[]): readonly unknown[] {
  for (let i = 0; i < params.length; i++) {
    const value = params[i];
    if (value === undefined || typeof value === 'boolean') return params.map(sqliteValue);
  }
  return params;
}

function sqliteStatement(connection: SqliteConnection, sql: string): SqliteStatement {
  let cache = prepared.get(connection);
  if (cache === undefined) prepared.set(connection, (cache = new Map()));
  let statement = cache.get(sql);
  if (statement === undefined) cache.set(sql, (statement = connection.prepare(sql)));
  return statement;
}

function sqliteStatements(connection: SqliteConnection): Statements {
  return {
    async rows<T>(sql: string, params: readonly unknown[] = []) {
      return sqliteStatement(connection, sql).all(...sqliteParams(params)) as T[];
    },
    async run(sql: string, params: readonly unknown[] = []) {
      return sqliteStatement(connection, sql).run(...sqliteParams(params)).changes;
    },
    async insertOne(sql: string, params: readonly unknown[] = []) {
      const { changes, lastInsertRowid } = sqliteStatement(connection, sql).run(...sqliteParams(params));
      return changes === 0 ? undefined : Number(lastInsertRowid);
    },
    async queue(sql: string, params: readonly unknown[] = []) {
      sqliteStatement(connection, sql).run(...sqliteParams(params));
    },
    async queueRows<T>(sql: string, params: readonly unknown[] = []) {
      return sqliteStatement(connection, sql).all(...sqliteParams(params)) as T[];
    },
  };
}

function pgStatement(sql: string): PgStatement {
  let named = pgNames.get(sql);
  if (named === undefined) {
    const text = toDialect(sql, 'postgres');
    named = { name: `hot_${createHash('sha1').update(sql).digest('hex').slice(0, 16)}`, text, elementTypes: arrayParameterTypes(text) };
    pgNames.set(sql, named);
  }
  return named;
}

/** Sockets corked until the end of this tick (see `corkThisTick`). */
const corked = new WeakSet<object>();

/**
 * PostgreSQL: holds back what is written to a session's socket until the end
 * of this tick (the nextTick after the promise jobs the tick runs), so the
 * statements a transaction sends in one go (START TRANSACTION and its first
 * statement; the queued ones and the COMMIT) leave in one write and wake the
 * server's backend once, instead of one write per statement. On one small
 * machine each write and wake-up takes CPU from both. A pool (no socket of its
 * own) is left alone.
 */
export function corkThisTick(session: object): void {
  const stream = (session as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
  if (!stream?.cork || !stream.uncork || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork!();
  });
}

function pgStatements(client: PgQueryable): Statements {
  const query = (sql: string, params: readonly unknown[]) => {
    corkThisTick(client);
    const { name, text, elementTypes } = pgStatement(sql);
    return client.query({ name, text, values: params.map((value, i) => pgParameter(value, elementTypes[i])) });
  };
  return {
    async rows<T>(sql: string, params: readonly unknown[] = []) {
      return (await query(sql, params)).rows as T[];
    },
    async run(sql: string, params: readonly unknown[] = []) {
      return (await query(sql, params)).rowCount ?? 0;
    },
    insertOne() {
      return Promise.reject(new Error('insertOne is SQLite\'s (a rowid): on PostgreSQL an INSERT returns what it needs with RETURNING'));
    },
    async queue(sql: string, params: readonly unknown[] = []) {
      const sent = query(sql, params);
      const pipeline = pipelines.get(client);
      if (pipeline === undefined) {
        await sent;
        return;
      }
      sent.catch(() => undefined); // Looked at when the transaction commits (transactions.ts, at the commit).
      pipeline.push(sent);
    },
    queueRows<T>(sql: string, params: readonly unknown[] = []) {
      const sent = query(sql, params);
      pipelines.get(client)?.push(sent);
      const rows = sent.then((result) => result.rows as T[]);
      rows.catch(() => undefined); // The commit fails with it; whoever waits for the rows hears of it too.
      return rows;
    },
  };
}

/**
 * PostgreSQL: from now until `closePipeline`, `queue` on this session sends
 * its statements without waiting for them (`sent`: statements already sent
 * whose failure must fail the commit too, such as the START TRANSACTION).
 */
export function openPipeline(session: object, sent: Array<Promise<unknown>>): void {
  for (const statement of sent) statement.catch(() => undefined);
  pipelines.set(session, [...sent]);
}

/** The statements queued on the session since `openPipeline`, which stops queuing. */
export function closePipeline(session: object): Array<Promise<unknown>> {
  const queued = pipelines.get(session) ?? [];
  pipelines.delete(session);
  return queued;
}

/**
 * Statements on the manager's connection: a transaction's (inside
 * `Database.write`), else the data source's own (SQLite's one connection,
 * PostgreSQL's pool).
 */
export function statementsOf(manager: EntityManager): Statements {
  const driver = manager.connection.driver as unknown as { databaseConnection?: SqliteConnection; master?: PgQueryable };
  const connection = (manager.queryRunner as unknown as { databaseConnection?: unknown } | undefined)?.databaseConnection;
  if (kindOf(manager.connection) === 'sqlite') return sqliteStatements((connection ?? driver.databaseConnection) as SqliteConnection);
  return pgStatements((connection ?? driver.master) as PgQueryable);
}
