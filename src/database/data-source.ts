/**
 * DATABASE_URL → TypeORM options. SQLite (through better-sqlite3, in WAL mode) is
 * the embedded default; PostgreSQL is the scale-out path. The schema comes from
 * migrations on both; nothing is synchronised from the entities.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import { databaseKind, type DatabaseKind } from '../config/database-kind.js';
import { loadWalCoalesce } from './wal-coalesce.js';
import { ActionRunEntity } from './action-run.entity.js';
import { EventEntity } from './event.entity.js';
import { ExecutionEntity } from './execution.entity.js';
import { ResourceSnapshotEntity } from './resource-snapshot.entity.js';
import { RuleStateEntity } from './rule-state.entity.js';
import { InitialSchema1764000000000 } from './migrations/1764000000000-initial-schema.js';
import { ApiRules1764100000000 } from './migrations/1764100000000-api-rules.js';
import { ApiRuleEntity } from './api-rule.entity.js';
import { LoopsAndThrottles1764200000000 } from './migrations/1764200000000-loops-and-throttles.js';
import { ResourceProvenanceEntity } from './resource-provenance.entity.js';
import { ClaimIndexes1764300000000 } from './migrations/1764300000000-claim-indexes.js';
import { StorageProbe1764400000000 } from './migrations/1764400000000-storage-probe.js';
import { SeenResource1764500000000 } from './migrations/1764500000000-seen-resource.js';
import { LeaseIndexes1764600000000 } from './migrations/1764600000000-lease-indexes.js';
import { CausalScopes1764700000000 } from './migrations/1764700000000-causal-scopes.js';
import { Replicas1764800000000 } from './migrations/1764800000000-replicas.js';
import { SharedRateBudget1764900000000 } from './migrations/1764900000000-shared-rate-budget.js';
import { TimeAndSets1765000000000 } from './migrations/1765000000000-time-and-sets.js';
import { WaitingByScope1765100000000 } from './migrations/1765100000000-waiting-by-scope.js';
import { UnleasedEvents1765200000000 } from './migrations/1765200000000-unleased-events.js';
import { SqliteUnseenByScope1765300000000 } from './migrations/1765300000000-sqlite-unseen-by-scope.js';
import { RunsByResource1765400000000 } from './migrations/1765400000000-runs-by-resource.js';
import { PostgresHotLeases1765500000000 } from './migrations/1765500000000-postgres-hot-leases.js';
import { RunsInFlightByKey1765600000000 } from './migrations/1765600000000-runs-in-flight-by-key.js';
import { FailedRunsByExecution1765700000000 } from './migrations/1765700000000-failed-runs-by-execution.js';
import { UnfinishedRunsWithoutList1765800000000 } from './migrations/1765800000000-unfinished-runs-without-list.js';
import { ThrottleKeysOnly1765900000000 } from './migrations/1765900000000-throttle-keys-only.js';
import { WaitingByResourceByKey1766000000000 } from './migrations/1766000000000-waiting-by-resource-by-key.js';
import { PostgresHotExecutions1766100000000 } from './migrations/1766100000000-postgres-hot-executions.js';
import { DebouncedBySuccessor1766200000000 } from './migrations/1766200000000-debounced-by-successor.js';
import { SqliteListsNewestFirst1766300000000 } from './migrations/1766300000000-sqlite-lists-newest-first.js';
import { fileFault, unwritableDatabase } from './storage-faults.js';

export const ENTITIES = [EventEntity, ExecutionEntity, ActionRunEntity, RuleStateEntity, ResourceSnapshotEntity, ApiRuleEntity, ResourceProvenanceEntity];
export const MIGRATIONS = [
  InitialSchema1764000000000,
  ApiRules1764100000000,
  LoopsAndThrottles1764200000000,
  ClaimIndexes1764300000000,
  StorageProbe1764400000000,
  SeenResource1764500000000,
  LeaseIndexes1764600000000,
  CausalScopes1764700000000,
  Replicas1764800000000,
  SharedRateBudget1764900000000,
  TimeAndSets1765000000000,
  WaitingByScope1765100000000,
  UnleasedEvents1765200000000,
  SqliteUnseenByScope1765300000000,
  RunsByResource1765400000000,
  PostgresHotLeases1765500000000,
  RunsInFlightByKey1765600000000,
  FailedRunsByExecution1765700000000,
  UnfinishedRunsWithoutList1765800000000,
  ThrottleKeysOnly1765900000000,
  WaitingByResourceByKey1766000000000,
  PostgresHotExecutions1766100000000,
  DebouncedBySuccessor1766200000000,
  SqliteListsNewestFirst1766300000000,
];

export { databaseKind, type DatabaseKind };

export function dataSourceOptions(url: string): DataSourceOptions {
  const common = { entities: ENTITIES, migrations: MIGRATIONS, migrationsRun: true, logging: false } as const;
  if (databaseKind(url) === 'postgres') {
    // Custom plans for every execution of the hot path's prepared statements: a
    // generic plan is made once from the statistics of the moment, and those of
    // a table that grew from empty in seconds send every claim through scans.
    // Pipelined sessions: a transaction's queued statements (statements.ts
    // `queue`) go out without waiting for the answers before them, which pg 8
    // deprecates (with a warning on stderr) and pg 9 refuses outside pipeline mode.
    const extra = { options: '-c plan_cache_mode=force_custom_plan', pipeline: true };
    return { ...common, type: 'postgres', url, poolSize: 10, extra };
  }
  const file = url.slice('sqlite:'.length);
  if (file !== ':memory:') {
    mkdirSync(dirname(file), { recursive: true });
    assertWritable(file);
    loadWalCoalesce();
  }
  return {
    ...common,
    type: 'better-sqlite3',
    database: file,
    enableWAL: file !== ':memory:',
    // Readers never block the writer in WAL; a busy writer is waited for, not
    // failed. How each commit is synced is chosen per write (database.service.ts).
    // Statement journals in memory: every write runs in an explicit transaction,
    // so a statement that touches several indexes (the event INSERT touches
    // nine) keeps a journal of the pages it changes, to undo itself alone if it
    // fails; once one statement's journal outgrew 64 KiB, SQLite wrote every
    // later statement's journal of that transaction to a temporary file, about
    // twenty writes an event (half the INSERT's time, intake ~12 % slower).
    // What it holds is a statement's pages, in batches of at most a few hundred
    // rows (intake, claims, retention); sorts and temporary indexes too.
    //
    // The log is copied into the file (checkpointed) once it holds 3,000 pages
    // instead of SQLite's 1,000: each checkpoint copies the latest version of
    // every page the log holds and syncs the file, and the pages written most
    // often (the last page of each table and index that grows at its end) are
    // then copied a third as often. End to end in the benchmark the engine's
    // transactions took 3-9 % less time per event in six runs out of six
    // against 1,000 (docs/performance-log.md, session 29); intake and the
    // open loop's p99 did not change. A crash replays at most 12 MiB of log.
    //
    // The page cache is SQLite's own default, 2,000 KiB (about 480 pages),
    // not the 16,000 better-sqlite3 compiles in. When an insert splits a
    // b-tree page, SQLite may swap the new pages' numbers through a spare
    // number far past the end of the file (balance_nonroot), and at the next
    // COMMIT it then walks the whole cache to drop pages past the end
    // (pcache1TruncateUnsafe): 131 µs each time with 16 MB, about one commit
    // in six end to end, 1.5 % of the main thread; 10 µs with 2 MB. The hot
    // path's pages fit either way (SQLite read about 0.03 pages an event from
    // the file system with 2 MB). Side by side (npm run bench:pair, session
    // 81): 0.959x the main thread's CPU an event end to end, intake the same.
    prepareDatabase: (db: { pragma(sql: string): unknown }) => {
      db.pragma('busy_timeout = 5000');
      db.pragma('temp_store = MEMORY');
      db.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
      db.pragma(`wal_autocheckpoint = ${SQLITE_CHECKPOINT_PAGES}`);
    },
  };
}

/** SQLite copies its write-ahead log into the database file once the log holds this many pages (SQLite's own default: 1,000). */
export const SQLITE_CHECKPOINT_PAGES = 3_000;

/** SQLite's page cache, in KiB (SQLite's own default; better-sqlite3 compiles in 16,000): see prepareDatabase above. */
export const SQLITE_CACHE_KIB = 2_000;

/**
 * The folder of a SQLite file must be writable (its write-ahead log and index
 * live there). Checked here, before the data source opens: on a read-only file
 * system SQLite cannot even read a WAL database, and a data source that fails to
 * open fails the engine's start inside Nest, with Nest's stack trace instead of
 * this message. (A read-only file in a writable folder opens, read-only, and the
 * engine's first write at start refuses it: database.service.ts. rules:backtest
 * only reads such a file.)
 */
function assertWritable(file: string): void {
  try {
    accessSync(dirname(file), constants.W_OK);
  } catch (error) {
    throw unwritableDatabase(`sqlite:${file}`, fileFault(error as NodeJS.ErrnoException, 'its folder cannot be written'));
  }
}

/** Where the database is, for messages: the SQLite file, or PostgreSQL's host, port and database without credentials. */
export function databaseLocation(options: DataSourceOptions): string {
  if (options.type !== 'postgres') return `sqlite:${String(options.database)}`;
  try {
    const url = new URL(options.url ?? '');
    return `postgres://${url.host}${url.pathname}`;
  } catch {
    return 'postgres';
  }
}
