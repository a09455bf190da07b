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
 */
import { Injectable } from '@nestjs/common';
import { Mutex } from 'async-mutex';
import { DataSource, type EntityManager } from 'typeorm';
import type { DatabaseKind } from './data-source.js';
import { kindOf } from './sql.js';

@Injectable()
export class Database {
  private readonly mutex = new Mutex();
  private synchronous: 'FULL' | 'NORMAL' | undefined;
  readonly kind: DatabaseKind;

  constructor(readonly dataSource: DataSource) {
    this.kind = kindOf(dataSource);
  }

  get manager(): EntityManager {
    return this.dataSource.manager;
  }

  write<T>(work: (manager: EntityManager) => Promise<T>, options: { durable?: boolean } = {}): Promise<T> {
    if (this.kind === 'postgres') return this.dataSource.transaction(work);
    return this.mutex.runExclusive(async () => {
      const wanted = options.durable ? 'FULL' : 'NORMAL';
      if (this.synchronous !== wanted) {
        await this.dataSource.query(`PRAGMA synchronous = ${wanted}`);
        this.synchronous = wanted;
      }
      return this.dataSource.transaction(work);
    });
  }
}
