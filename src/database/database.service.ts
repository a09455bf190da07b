/**
 * All writes go through `write()`, which runs them as one transaction.
 *
 * Why: TypeORM drives SQLite through a single shared connection, so two
 * transactions started concurrently from different async flows would nest as
 * savepoints of each other, and a plain statement from one flow would land
 * inside another flow's open transaction (and be rolled back with it). On SQLite
 * writes are therefore serialised by a mutex; each is short (better-sqlite3 is
 * synchronous and nothing slow, such as an HTTP call, ever runs inside one).
 * PostgreSQL has a connection pool and real isolation, so there the mutex is
 * skipped.
 *
 * Durability on SQLite: a write that acknowledges something to the outside
 * (an accepted webhook) is `durable` and synced to disk before it returns
 * (synchronous=FULL); the engine's own bookkeeping is synced in WAL order with
 * the next durable write or checkpoint (synchronous=NORMAL), which survives a
 * crash of the process but may lose its last moments to a power cut. That loss is
 * safe: the work is simply done again, and action runs have ids derived from
 * what they are (event, rule, position), so a re-done action keeps its
 * Idempotency-Key.
 *
 * On PostgreSQL every commit waits for its WAL to be flushed (the server's
 * default, synchronous_commit=on). The bookkeeping there includes the commits
 * that lease a run before its request goes out and record the answer after;
 * without the flush, a crash of the server (test/postgres-restart.e2e-spec.ts)
 * lost the last of them, and the requests were sent a second time (with the
 * same Idempotency-Key, so once in effect, but twice on the wire).
 *
 * Storage faults: a write the database refuses (full disk, read-only file, I/O
 * error, PostgreSQL unreachable or refusing writes) throws
 * StorageUnavailableError (503 with Retry-After) and starts a fault in
 * `health`; the connection is left clean for the next write (transactions.ts),
 * and on SQLite reopened when only a new connection can see the file repaired.
 * While a fault lasts, a write that goes through is followed by a probe, one
 * real write to `storage_probe` (a write that changes nothing proves nothing on
 * a full disk), and the fault ends when the probe goes through once no write
 * has failed for a second (storage-health.ts).
 *
 * Most writes are refused at once, and whoever asked says so (a webhook is
 * answered 503, a worker pauses and its lease is handed back or runs out). A
 * write that records something already true outside the database, such as the
 * service's answer to a request, is instead tried again for a while
 * (`patiently`): given up, it would be done again, and the request sent again,
 * when its lease ran out. That carries such writes over a PostgreSQL restart.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import { Mutex } from 'async-mutex';
import { DataSource, type EntityManager } from 'typeorm';
import { StorageUnavailableError } from '../errors.js';
import { databaseLocation, type DatabaseKind } from './data-source.js';
import { kindOf, queryRows } from './sql.js';
import { statementsOf } from './statements.js';
import { storageFaultOf, unwritableDatabase, type StorageFault } from './storage-faults.js';
import { StorageHealth } from './storage-health.js';
import { inTransaction, reopenSqlite } from './transactions.js';

type Work<T> = (manager: EntityManager) => Promise<T>;

/** Faults that a new SQLite connection may cure once the file is repaired; tried at most this often. */
const REOPEN_KINDS = new Set(['read_only', 'io_error']);
const REOPEN_EVERY_MS = 1_000;
/** Pauses between the tries of a patient write: short, as a restarted server takes writes again within about a second. */
const PATIENT_PAUSES_MS = [100, 200, 400, 800, 1_000];

const probe: Work<unknown> = (manager) => queryRows(manager, 'UPDATE storage_probe SET written_at = ? WHERE id = 1', [new Date().toISOString()]);

@Injectable()
export class Database implements OnModuleInit {
  private readonly mutex = new Mutex();
  private synchronous: 'FULL' | 'NORMAL' | undefined;
  private reopenedAt = 0;
  readonly kind: DatabaseKind;
  readonly health = new StorageHealth();

  constructor(readonly dataSource: DataSource) {
    this.kind = kindOf(dataSource);
  }

  get manager(): EntityManager {
    return this.dataSource.manager;
  }

  /** The engine does not start on a database it cannot write: it says why, instead of failing on the first webhook. */
  async onModuleInit(): Promise<void> {
    try {
      await this.attempt(probe, { durable: true });
    } catch (error) {
      const fault = storageFaultOf(error);
      throw fault ? unwritableDatabase(databaseLocation(this.dataSource.options), fault) : error;
    }
  }

  async write<T>(work: Work<T>, options: { durable?: boolean } = {}): Promise<T> {
    let result: T;
    try {
      result = await this.attempt(work, options);
    } catch (error) {
      const fault = storageFaultOf(error);
      throw fault ? this.health.failed(fault) : error;
    }
    if (this.health.current && this.health.settled) await this.probe();
    return result;
  }

  /**
   * Runs `write` (something that calls `write()`) and, while the database
   * refuses writes, again after a pause, for up to `withinMs`; then gives up
   * with the last refusal. For writes whose work is already done and cannot
   * be taken back; `write` must be safe to run twice (its first try may have
   * committed when the connection was lost before the answer came).
   */
  async patiently<T>(write: () => Promise<T>, withinMs: number): Promise<T> {
    const deadline = Date.now() + withinMs;
    for (let tries = 0; ; tries++) {
      try {
        return await write();
      } catch (error) {
        const pause = PATIENT_PAUSES_MS[Math.min(tries, PATIENT_PAUSES_MS.length - 1)];
        if (!(error instanceof StorageUnavailableError) || Date.now() + pause > deadline) throw error;
        await sleep(pause);
      }
    }
  }

  /** Tries one real write; true when it goes through and no fault is left (storage-health.ts says when one ends). */
  async probe(): Promise<boolean> {
    try {
      await this.attempt(probe, { durable: true });
    } catch (error) {
      const fault = storageFaultOf(error);
      if (!fault) throw error;
      this.health.failed(fault);
      return false;
    }
    return this.health.recovered();
  }

  private attempt<T>(work: Work<T>, options: { durable?: boolean }): Promise<T> {
    if (this.kind === 'postgres') return inTransaction(this.dataSource, work);
    return this.mutex.runExclusive(async () => {
      try {
        const wanted = options.durable ? 'FULL' : 'NORMAL';
        if (this.synchronous !== wanted) {
          // On the driver's connection, prepared once: every switch between intake and bookkeeping pays for it.
          await statementsOf(this.dataSource.manager).run(`PRAGMA synchronous = ${wanted}`);
          this.synchronous = wanted;
        }
        return await inTransaction(this.dataSource, work);
      } catch (error) {
        await this.reopenIfItHelps(storageFaultOf(error));
        throw error;
      }
    });
  }

  private async reopenIfItHelps(fault: StorageFault | undefined): Promise<void> {
    if (!fault || !REOPEN_KINDS.has(fault.kind) || Date.now() - this.reopenedAt < REOPEN_EVERY_MS) return;
    this.reopenedAt = Date.now();
    this.synchronous = undefined;
    await reopenSqlite(this.dataSource).catch(() => undefined); // still failing: the next write says so, and tries again later
  }
}
