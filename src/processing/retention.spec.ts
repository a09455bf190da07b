import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { In } from 'typeorm';
import { ActionRunEntity, type ActionRunStatus } from '../database/action-run.entity.js';
import type { EngineConfig } from '../config/config.js';
import type { Database } from '../database/database.service.js';
import { EventEntity, type EventStatus } from '../database/event.entity.js';
import { databasesUnderTest, type TestDatabase } from '../../test/support/databases.js';
import { ManualClock, openDatabase, sqlitePlan } from '../../test/support/storage.js';
import { waitUntil } from '../../test/support/wait.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { queryRows } from '../database/sql.js';
import { SELF_CAUSED_WINDOW_MS } from './loop-guard.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';
import { PRUNE_BATCH, Retention } from './retention.js';

const kinds = await databasesUnderTest('retention');

const DAY = 86_400_000;
const RETENTION_DAYS = 30;
const NOW = new Date('2026-06-01T03:00:00.000Z');
const iso = (msAgo: number) => new Date(NOW.getTime() - msAgo).toISOString();
const OLD = iso((RETENTION_DAYS + 1) * DAY);
const RECENT = iso((RETENTION_DAYS - 1) * DAY);

interface StoredEvent {
  seq: number;
  eventId: string;
}

// The prune's summary log line is not part of what these tests look at.
beforeAll(() => Logger.overrideLogger(false));

describe.each(kinds)(`${Retention.name} on $name`, (kind) => {
  let testDb: TestDatabase;
  let db: Database;
  let clock: ManualClock;
  let retention: Retention;

  beforeEach(async () => {
    testDb = await kind.create();
    db = await openDatabase(testDb.url);
    clock = new ManualClock(NOW);
    retention = new Retention({ retentionDays: RETENTION_DAYS } as EngineConfig, clock, db);
  });

  afterEach(async () => {
    await db.dataSource.destroy();
    await testDb.drop();
  });

  /**
   * Stores `count` events received at `receivedAt`, each with one execution and
   * one action run (unless `runStatus` is null), in chunks the drivers accept.
   */
  async function storeEvents(
    count: number,
    receivedAt: string,
    { status = 'processed' as EventStatus, runStatus = 'succeeded' as ActionRunStatus | null } = {},
  ): Promise<StoredEvent[]> {
    const stored: StoredEvent[] = [];
    for (let start = 0; start < count; start += 200) {
      const n = Math.min(200, count - start);
      const events = Array.from({ length: n }, () => {
        const eventId = `evt_${randomUUID()}`;
        return {
          eventId, type: 'task.completed', resourceKey: `task:${eventId}`, status, source: 'webhook' as const,
          payload: JSON.stringify({ id: eventId, type: 'task.completed', data: {} }), depth: 0, selfCaused: false,
          receivedAt, processedAt: status === 'received' ? null : receivedAt, attempts: 0, nextAttemptAt: receivedAt,
        };
      });
      await db.write((m) => m.insert(EventEntity, events));
      const rows = await db.manager.find(EventEntity, { where: { eventId: In(events.map((e) => e.eventId)) }, select: { seq: true, eventId: true } });
      const chunk = rows.map((r) => ({ seq: Number(r.seq), eventId: r.eventId }));
      stored.push(...chunk);
      if (runStatus === null) continue;
      const executions = chunk.map((e) => ({
        id: randomUUID(), eventSeq: e.seq, eventId: e.eventId, ruleId: 'follow-up', ruleVersion: 'v1',
        status: runStatus === 'succeeded' ? 'succeeded' as const : 'running' as const,
        conditions: '[]', ruleSnapshot: '{}', createdAt: receivedAt, finishedAt: runStatus === 'succeeded' ? receivedAt : null,
      }));
      await db.write((m) => m.insert(ExecutionEntity, executions));
      const runs = executions.map((x) => ({
        id: randomUUID(), executionId: x.id, eventSeq: x.eventSeq, resourceKey: `task:${x.eventId}`, ruleId: 'follow-up',
        position: 0, actionId: null, type: 'task.create', status: runStatus, attempts: 1, nextAttemptAt: receivedAt,
        createdAt: receivedAt, updatedAt: receivedAt,
      }));
      await db.write((m) => m.insert(ActionRunEntity, runs));
    }
    return stored;
  }

  /** Wraps `db.write` to record how many events each transaction removed (one entry per transaction). */
  async function countDeletionsPerTransaction(): Promise<number[]> {
    const perTransaction: number[] = [];
    const realWrite = db.write.bind(db);
    let before = await db.manager.count(EventEntity);
    db.write = (async (work: Parameters<Database['write']>[0]) => {
      const result = await realWrite(work);
      const after = await db.manager.count(EventEntity);
      perTransaction.push(before - after);
      before = after;
      return result;
    }) as Database['write'];
    return perTransaction;
  }

  async function remaining(events: StoredEvent[]) {
    const seqs = events.map((e) => e.seq);
    const [evts, executions, runs] = await Promise.all([
      db.manager.countBy(EventEntity, { seq: In(seqs) }),
      db.manager.countBy(ExecutionEntity, { eventSeq: In(seqs) }),
      db.manager.countBy(ActionRunEntity, { eventSeq: In(seqs) }),
    ]);
    return { events: evts, executions, runs };
  }

  describe('old finished events', () => {
    it('go with their executions and action runs, in batches of PRUNE_BATCH, while recent ones stay', async () => {
      const oldCount = 2 * PRUNE_BATCH + 37;
      const old = await storeEvents(oldCount, OLD);
      const recent = await storeEvents(25, RECENT);
      const deletedPerTransaction = await countDeletionsPerTransaction();

      expect(await retention.prune()).toBe(oldCount);
      expect(await remaining(old)).toEqual({ events: 0, executions: 0, runs: 0 });
      expect(await remaining(recent)).toEqual({ events: 25, executions: 25, runs: 25 });
      expect(deletedPerTransaction.filter((n) => n > 0)).toEqual([PRUNE_BATCH, PRUNE_BATCH, 37]);
    });

    it('go whatever their final status, but an event still waiting to be evaluated stays', async () => {
      const finished = [
        ...(await storeEvents(2, OLD, { status: 'processed' })),
        ...(await storeEvents(2, OLD, { status: 'ignored', runStatus: null })),
        ...(await storeEvents(2, OLD, { status: 'failed', runStatus: 'failed' })),
        ...(await storeEvents(2, OLD, { status: 'loop_blocked', runStatus: null })),
      ];
      const waiting = await storeEvents(1, OLD, { status: 'received', runStatus: null });
      expect(await retention.prune()).toBe(finished.length);
      expect((await remaining(finished)).events).toBe(0);
      expect((await remaining(waiting)).events).toBe(1);
    });

    it('stay while one of their action runs is unfinished (pending, running or retrying)', async () => {
      const retrying = await storeEvents(1, OLD, { runStatus: 'retrying' });
      const pending = await storeEvents(1, OLD, { runStatus: 'pending' });
      const running = await storeEvents(1, OLD, { runStatus: 'running' });
      const done = await storeEvents(1, OLD);
      expect(await retention.prune()).toBe(1);
      for (const unfinished of [retrying, pending, running]) {
        expect(await remaining(unfinished)).toEqual({ events: 1, executions: 1, runs: 1 });
      }
      expect(await remaining(done)).toEqual({ events: 0, executions: 0, runs: 0 });
    });

    it('are kept until they are strictly older than RETENTION_DAYS', async () => {
      const atCutoff = await storeEvents(1, iso(RETENTION_DAYS * DAY));
      const justPast = await storeEvents(1, iso(RETENTION_DAYS * DAY + 1));
      expect(await retention.prune()).toBe(1);
      expect((await remaining(atCutoff)).events).toBe(1);
      expect((await remaining(justPast)).events).toBe(0);
    });

    it('go on a later prune once the retrying run has finished and the clock has moved on', async () => {
      const [event] = await storeEvents(1, OLD, { runStatus: 'retrying' });
      expect(await retention.prune()).toBe(0);
      await db.write((m) => m.update(ActionRunEntity, { eventSeq: event.seq }, { status: 'succeeded' }));
      clock.advance(DAY);
      expect(await retention.prune()).toBe(1);
      expect(await remaining([event])).toEqual({ events: 0, executions: 0, runs: 0 });
    });

    if (kind.name === 'sqlite') {
      it('finds each batch\'s executions and action runs by key: no statement it runs reads all of them (SQLite plans)', async () => {
        await storeEvents(PRUNE_BATCH + 3, OLD);
        await storeEvents(3, RECENT);
        const statements: string[] = [];
        const logger = db.dataSource.logger;
        db.dataSource.logger = { ...logger, logQuery: (query: string) => void statements.push(query) } as typeof logger;
        try {
          expect(await retention.prune()).toBe(PRUNE_BATCH + 3);
        } finally {
          db.dataSource.logger = logger;
        }
        const batchWork = statements.filter((sql) => /action_runs|executions/.test(sql));
        expect(batchWork.length).toBeGreaterThanOrEqual(4); // the batch's query, then per batch its runs and executions
        const scans: string[] = [];
        for (const sql of batchWork) {
          const plan = await sqlitePlan(db, sql);
          if (/SCAN (action_runs|executions)|SCAN a\b|SCAN x\b/.test(plan)) scans.push(`${sql}\n${plan}`);
        }
        expect(scans).toEqual([]);
      });
    }

    it('finds nothing to do in an empty database', async () => {
      expect(await retention.prune()).toBe(0);
    });
  });

  describe('resource snapshots and provenance', () => {
    it('drops snapshots not updated within RETENTION_DAYS and provenance older than the self-caused window', async () => {
      await db.write(async (m) => {
        await m.insert(ResourceSnapshotEntity, [
          { resourceKey: 'task:old', payload: '{}', eventSeq: 1, updatedAt: OLD },
          { resourceKey: 'task:recent', payload: '{}', eventSeq: 2, updatedAt: RECENT },
        ]);
        await m.insert(ResourceProvenanceEntity, [
          { resourceKey: 'task:stale', depth: 1, actionRunId: randomUUID(), ruleId: 'r', changedAt: iso(SELF_CAUSED_WINDOW_MS + 1000) },
          { resourceKey: 'task:fresh', depth: 1, actionRunId: randomUUID(), ruleId: 'r', changedAt: iso(SELF_CAUSED_WINDOW_MS - 1000) },
        ]);
      });
      await retention.prune();
      const snapshots = await db.manager.find(ResourceSnapshotEntity, { order: { resourceKey: 'ASC' } });
      expect(snapshots.map((s) => s.resourceKey)).toEqual(['task:recent']);
      const provenance = await db.manager.find(ResourceProvenanceEntity);
      expect(provenance.map((p) => p.resourceKey)).toEqual(['task:fresh']);
    });

    it('drops every stale snapshot of a table read in many short transactions, and provenance a batch at a time', async () => {
      const snapshots = 12_000;
      const stale = (i: number) => i % 3 === 1;
      for (let start = 0; start < snapshots; start += 500) {
        const rows = Array.from({ length: 500 }, (_, j) => start + j);
        await db.write((m) => queryRows(m, `INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at) VALUES ${rows.map(() => '(?, ?, ?, ?)').join(', ')}`,
          rows.flatMap((i) => [`task:${i}`, JSON.stringify({ id: `tsk_${i}`, title: 'x'.repeat(100) }), i + 1, stale(i) ? OLD : RECENT])));
      }
      const provenance = PRUNE_BATCH * 2 + 7;
      await db.write((m) => m.insert(ResourceProvenanceEntity, Array.from({ length: provenance + 3 }, (_, i) => ({
        resourceKey: `task:p${i}`, depth: 1, actionRunId: randomUUID(), ruleId: 'r',
        changedAt: iso(i < provenance ? SELF_CAUSED_WINDOW_MS + 1000 + i : SELF_CAUSED_WINDOW_MS - 1000),
      }))));
      expect(await planOfASlice()).toMatch(kind.name === 'sqlite' ? /SEARCH resource_snapshots USING INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)/ : /Tid Range Scan on resource_snapshots/);
      // Each slice or batch is a write of its own (Database.write): one DELETE, one transaction.
      const deletes: string[] = [];
      const logger = db.dataSource.logger;
      db.dataSource.logger = { ...logger, logQuery: (query: string) => void (/^DELETE FROM "?resource_(snapshots|provenance)/.test(query) && deletes.push(query)) } as typeof logger;
      try {
        await retention.prune();
      } finally {
        db.dataSource.logger = logger;
      }
      const kept = await queryRows<{ resource_key: string }>(db.manager, 'SELECT resource_key FROM resource_snapshots');
      expect(kept.map((r) => r.resource_key).sort()).toEqual(Array.from({ length: snapshots }, (_, i) => i).filter((i) => !stale(i)).map((i) => `task:${i}`).sort());
      const left = await db.manager.find(ResourceProvenanceEntity);
      expect(left.map((p) => p.resourceKey).sort()).toEqual([`task:p${provenance}`, `task:p${provenance + 1}`, `task:p${provenance + 2}`]);
      // The snapshots in three slices or more (SQLite: 12,000 rowids, PostgreSQL: some 380 pages), the provenance in three batches.
      expect(deletes.filter((sql) => sql.includes('snapshots')).length).toBeGreaterThanOrEqual(kind.name === 'sqlite' ? 3 : 2);
      expect(deletes.filter((sql) => sql.includes('provenance'))).toHaveLength(3);
    });

    if (kind.name === 'postgres') {
      it('keeps a provenance row that an outcome renews while the prune is deleting it', async () => {
        const stale = iso(SELF_CAUSED_WINDOW_MS + 60_000);
        await db.write((m) => m.insert(ResourceProvenanceEntity, ['task:renewed', 'task:old'].map((resourceKey) => ({
          resourceKey, depth: 1, actionRunId: randomUUID(), ruleId: 'r', changedAt: stale,
        }))));
        // An outcome's transaction renews the row, and commits only once the prune's DELETE waits for it.
        const outcome = db.dataSource.createQueryRunner();
        await outcome.connect();
        await outcome.startTransaction();
        try {
          await outcome.query(`UPDATE resource_provenance SET changed_at = $1 WHERE resource_key = 'task:renewed'`, [NOW.toISOString()]);
          const pruning = retention.prune();
          await waitUntil(async () => {
            const [{ n }] = await queryRows<{ n: number }>(db.manager, `SELECT COUNT(*)::int AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM "resource_provenance"%'`);
            return n > 0;
          }, { what: "the prune's DELETE of provenance to wait for the outcome's row" });
          await outcome.commitTransaction();
          await pruning;
        } finally {
          await outcome.release();
        }
        const left = await db.manager.find(ResourceProvenanceEntity);
        expect(left.map((p) => [p.resourceKey, p.changedAt])).toEqual([['task:renewed', NOW.toISOString()]]);
      });
    }

    /** The plan of a slice's DELETE, on a table of some size (PostgreSQL reads an empty one whole: it is cheaper). */
    async function planOfASlice(): Promise<string> {
      return kind.name === 'sqlite'
        ? await sqlitePlan(db, 'DELETE FROM resource_snapshots WHERE rowid >= ? AND rowid < ? AND updated_at < ?')
        : (await queryRows<{ 'QUERY PLAN': string }>(db.manager, `EXPLAIN DELETE FROM resource_snapshots WHERE ctid >= '(0,0)'::tid AND ctid < '(200,0)'::tid AND updated_at < '2026'`))
          .map((r) => r['QUERY PLAN']).join('\n');
    }
  });
});
