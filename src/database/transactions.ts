/**
 * One transaction, and what must happen when it fails so the next one starts
 * on a clean connection. TypeORM's own `transaction()` is not enough for that:
 *
 * - SQLite rolls a transaction back by itself when a write or the COMMIT fails
 *   with SQLITE_FULL or an I/O error. TypeORM's ROLLBACK then fails ("no
 *   transaction is active") and its shared query runner keeps counting one open
 *   transaction, so every later transaction becomes a SAVEPOINT, which SQLite
 *   turns into a real transaction that is never committed: the connection stays
 *   inside it and every write after it fails until a restart. Here the
 *   connection itself says whether a transaction is open; it is rolled back if
 *   so, and the query runner (whose count is wrong) is dropped for a fresh one.
 * - On PostgreSQL a session that refused a write (read-only, terminated, lost)
 *   goes back to the pool marked broken, so the pool opens a new one instead of
 *   handing out the same refusing session again.
 *
 * The TypeORM internals used are named in `SqliteDriverInternals` and
 * `PostgresRunnerInternals` (typeorm 1.x).
 */
import { existsSync } from 'node:fs';
import { QueryRunnerAlreadyReleasedError, TransactionAlreadyStartedError, type DataSource, type EntityManager, type QueryRunner } from 'typeorm';
import { closePipeline, corkThisTick, openPipeline, statementsOf } from './statements.js';
import { storageFaultOf } from './storage-faults.js';

/** better-sqlite3's connection, as much of it as is used here. */
interface SqliteConnection {
  readonly open: boolean;
  readonly inTransaction: boolean;
  exec(sql: string): unknown;
  close(): unknown;
}

interface SqliteDriverInternals {
  databaseConnection?: SqliteConnection;
  /** The one query runner TypeORM shares on SQLite; recreated on demand. */
  queryRunner?: QueryRunner;
  options: { database: string };
  connect(): Promise<void>;
}

/** How TypeORM's query runner knows a transaction is open (both drivers). */
interface TransactionBookkeeping {
  isTransactionActive: boolean;
  transactionDepth: number;
}

interface PostgresRunnerInternals {
  /** Gives the connection back to the pool with an error, so the pool discards it. */
  releasePostgresConnection(error?: unknown): Promise<void>;
  /** The pool's session, once connected. */
  databaseConnection: { query(text: string): Promise<unknown> };
  isTransactionActive: boolean;
  transactionDepth: number;
}

function sqliteDriver(dataSource: DataSource): SqliteDriverInternals {
  return dataSource.driver as unknown as SqliteDriverInternals;
}

/** Runs `work` in one transaction; on failure leaves the connection (or the pool) ready for the next one. */
export async function inTransaction<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  if (dataSource.options.type !== 'postgres') return inSqliteTransaction(dataSource, work);
  const runner = dataSource.createQueryRunner();
  try {
    await beginPipelined(runner);
    const result = await work(runner.manager);
    await commitPipelined(runner);
    return result;
  } catch (error) {
    const cause = lostConnection(runner, error) ?? error;
    await abandonPostgres(runner, cause);
    throw cause;
  } finally {
    const session = (runner as unknown as Partial<PostgresRunnerInternals>).databaseConnection;
    if (session) closePipeline(session);
    await runner.release();
  }
}

/**
 * SQLite: BEGIN and COMMIT run on the driver's connection as statements prepared once (statements.ts), with TypeORM's
 * bookkeeping of the open transaction set as its own `startTransaction` and `commitTransaction` set it, so that what
 * `work` does through the manager (the admin side's saves) runs inside this transaction as before. TypeORM's pair
 * went through its query runner (its broadcaster's events before and after each, its logger, a result object) and
 * `createQueryRunner` made a new EntityManager each time: about 1 % of the engine's instructions per event end to
 * end, at one to three transactions an event (session 34). A failed BEGIN or COMMIT throws the driver's own error,
 * as the hot path's statements do, not TypeORM's QueryFailedError around it (storage-faults.ts reads either).
 */
async function inSqliteTransaction<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  const runner = sharedSqliteRunner(dataSource);
  const bookkeeping = runner as unknown as TransactionBookkeeping;
  if (bookkeeping.isTransactionActive) throw new TransactionAlreadyStartedError();
  try {
    const sql = statementsOf(runner.manager);
    await sql.run('BEGIN TRANSACTION');
    bookkeeping.isTransactionActive = true;
    bookkeeping.transactionDepth = 1;
    const result = await work(runner.manager);
    await sql.run('COMMIT');
    bookkeeping.isTransactionActive = false;
    bookkeeping.transactionDepth = 0;
    return result;
  } catch (error) {
    abandonSqlite(dataSource);
    throw error;
  }
}

/**
 * PostgreSQL: every statement is a round trip, and while the event loop is
 * busy its answer waits for a turn of the loop (about 2 ms each under load,
 * as long as the statement itself). START TRANSACTION is therefore sent
 * without waiting for its answer: the session sends queued statements in
 * order, so the transaction's first statement follows it at once (in the same
 * write to the socket: `corkThisTick`, statements.ts). What the
 * transaction `queue`s (statements.ts) travels the same way, ahead of the
 * COMMIT. TypeORM's bookkeeping of the open transaction is set as its own
 * `startTransaction` sets it, so its `commitTransaction` and
 * `rollbackTransaction` work as before.
 */
async function beginPipelined(runner: QueryRunner): Promise<void> {
  await runner.connect();
  const internals = runner as unknown as PostgresRunnerInternals;
  const session = internals.databaseConnection;
  corkThisTick(session);
  const begun = session.query('START TRANSACTION');
  internals.isTransactionActive = true;
  internals.transactionDepth = 1;
  openPipeline(session, [begun]);
}

/**
 * Sends the COMMIT behind whatever was queued, then waits for all of it. When
 * a queued statement failed, PostgreSQL has ended the transaction and answers
 * the COMMIT with a ROLLBACK: nothing of it was stored, and the statement's
 * error is the transaction's.
 */
async function commitPipelined(runner: QueryRunner): Promise<void> {
  const session = (runner as unknown as PostgresRunnerInternals).databaseConnection;
  const queued = closePipeline(session);
  corkThisTick(session);
  const committed = runner.commitTransaction();
  const settled = await Promise.allSettled(queued);
  await committed;
  const failed = settled.find((outcome) => outcome.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/**
 * SQLite's one query runner (TypeORM shares it), with its manager. `DataSource.createQueryRunner` returns the same
 * runner with a new EntityManager each time; the manager made the first time is kept instead (a new runner, after
 * `abandonSqlite` or a reopen, gets one of its own).
 */
function sharedSqliteRunner(dataSource: DataSource): QueryRunner {
  const runner = dataSource.driver.createQueryRunner('master');
  if ((runner as Partial<QueryRunner>).manager === undefined) Object.assign(runner, { manager: dataSource.createEntityManager(runner) });
  return runner;
}

function abandonSqlite(dataSource: DataSource): void {
  const driver = sqliteDriver(dataSource);
  const connection = driver.databaseConnection;
  try {
    if (connection?.open && connection.inTransaction) connection.exec('ROLLBACK');
  } catch {
    // Nothing left to roll back, or the connection is gone: a reopen deals with that.
  }
  driver.queryRunner = undefined;
}

/**
 * TypeORM lets go of a session whose connection failed (the server ended it,
 * the network dropped it) the moment the pool reports it; the next statement
 * of the transaction then fails with "query runner already released". That is
 * the lost connection, and is reported as one (SQLSTATE 08006).
 */
function lostConnection(runner: QueryRunner, error: unknown): Error | undefined {
  if (!(error instanceof QueryRunnerAlreadyReleasedError) || !runner.isReleased) return undefined;
  return Object.assign(new Error('the connection to the database was lost during the transaction'), { code: '08006' });
}

async function abandonPostgres(runner: QueryRunner, error: unknown): Promise<void> {
  let broken = storageFaultOf(error) !== undefined;
  if (runner.isTransactionActive && !runner.isReleased) {
    // After a failed COMMIT PostgreSQL has already ended the transaction; ROLLBACK then only warns.
    await runner.rollbackTransaction().catch(() => (broken = true));
  }
  if (broken) await (runner as unknown as PostgresRunnerInternals).releasePostgresConnection(error);
}

/**
 * Closes SQLite's connection and opens it again, as the data source did at
 * start (pragmas, WAL). A connection opened while its file could not be written
 * stays read-only, and one whose file system failed keeps failing, however the
 * file is repaired: only a new connection sees the repaired file. An in-memory
 * database is never reopened (that would lose it), and a file that has gone is
 * not created afresh: the engine waits for it to come back.
 */
export async function reopenSqlite(dataSource: DataSource): Promise<void> {
  const driver = sqliteDriver(dataSource);
  const file = driver.options.database;
  if (file === ':memory:') return;
  try {
    driver.databaseConnection?.close();
  } catch {
    // Closing a connection whose file system failed may fail too; it is let go all the same.
  }
  driver.queryRunner = undefined;
  if (existsSync(file)) await driver.connect();
}
