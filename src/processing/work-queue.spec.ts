import { randomUUID } from 'node:crypto';
import { ActionRunEntity } from '../database/action-run.entity.js';
import type { Database } from '../database/database.service.js';
import { EventEntity } from '../database/event.entity.js';
import { statementsOf } from '../database/statements.js';
import { EventWriter, type NewEvent } from '../intake/event-writer.js';
import { databasesUnderTest, type TestDatabase } from '../../test/support/databases.js';
import { ManualClock, openDatabase, useQueueStore } from '../../test/support/storage.js';
import { claimWantsStatistics, EVENT_LEASE_MS, WorkQueue } from './work-queue.js';

const kinds = await databasesUnderTest('work queue');

function anEvent(overrides: Partial<NewEvent> = {}): NewEvent {
  const eventId = overrides.eventId ?? `evt_${randomUUID()}`;
  return { eventId, type: 'task.updated', resourceKey: null, source: 'webhook', payload: JSON.stringify({ id: eventId }), ...overrides };
}

describe('which event claims ask for fresh statistics (PostgreSQL)', () => {
  it.each([
    { what: 'a full claim (a backlog: the tables are growing)', plannedOnce: false, ms: 2, taken: 32, wanted: true },
    { what: 'a full claim planned once by key', plannedOnce: true, ms: 2, taken: 32, wanted: true },
    { what: 'a slow claim planned for its values', plannedOnce: false, ms: 25, taken: 3, wanted: true },
    { what: 'a slow claim planned once by key after one that found nothing', plannedOnce: true, ms: 25, taken: 0, wanted: false },
    { what: 'a quick claim that took some', plannedOnce: false, ms: 19, taken: 3, wanted: false },
    { what: 'a quick claim that found nothing', plannedOnce: true, ms: 1, taken: 0, wanted: false },
  ])('$what: $wanted', ({ plannedOnce, ms, taken, wanted }) => {
    expect(claimWantsStatistics({ plannedOnce, ms, taken, limit: 32 })).toBe(wanted);
  });
});

describe.each(kinds)(`${WorkQueue.name} on $name`, (kind) => {
  const store = useQueueStore(kind);
  let db: Database;
  let clock: ManualClock;
  let writer: EventWriter;
  let queue: WorkQueue;

  // After the store's own beforeEach, which opens a fresh database.
  beforeEach(() => {
    ({ db, clock, writer, queue } = store);
  });

  async function finish(eventId: string) {
    await db.write((m) => m.update(EventEntity, { eventId }, { status: 'processed', leaseOwner: null, leaseUntil: null }));
  }

  async function addRun(event: EventEntity, status: ActionRunEntity['status'], nextAttemptAt = clock.now().toISOString()) {
    const id = randomUUID();
    const now = clock.now().toISOString();
    await db.write((m) =>
      m.insert(ActionRunEntity, {
        id, executionId: randomUUID(), eventSeq: event.seq, resourceKey: event.resourceKey, ruleId: 'r', position: 0,
        actionId: null, type: 'task.create', status, attempts: 0, nextAttemptAt, createdAt: now, updatedAt: now,
      }),
    );
    return id;
  }

  const byId = (eventId: string) => db.manager.findOneByOrFail(EventEntity, { eventId });

  describe('claiming events', () => {
    it('hands out received events in the order they arrived, each once while its lease holds', async () => {
      for (const id of ['a', 'b', 'c']) await writer.write(anEvent({ eventId: id }));
      expect((await queue.claimEvents(2)).map((e) => e.event_id)).toEqual(['a', 'b']);
      expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['c']);
      expect(await queue.claimEvents(10)).toEqual([]);
    });

    it('hands an event out again once the lease of a holder that died has run out', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const other = new WorkQueue(db, clock);
      expect(await other.claimEvents(1)).toHaveLength(1);
      clock.advance(EVENT_LEASE_MS - 1);
      expect(await queue.claimEvents(1)).toEqual([]);
      clock.advance(2);
      expect((await queue.claimEvents(1)).map((e) => e.event_id)).toEqual(['a']);
    });
  });

  describe('per-resource order', () => {
    it('holds a later event about the same resource until the earlier one is done', async () => {
      await writer.write(anEvent({ eventId: 'a1', resourceKey: 'task:1' }));
      await writer.write(anEvent({ eventId: 'a2', resourceKey: 'task:1' }));
      await writer.write(anEvent({ eventId: 'b1', resourceKey: 'task:2' }));
      expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['a1', 'b1']);
      expect(await queue.claimEvents(10)).toEqual([]);
      await finish('a1');
      expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['a2']);
    });

    it('holds it while the earlier event still has unfinished action runs on that resource', async () => {
      await writer.write(anEvent({ eventId: 'a1', resourceKey: 'task:1' }));
      await writer.write(anEvent({ eventId: 'a2', resourceKey: 'task:1' }));
      await queue.claimEvents(1);
      await finish('a1');
      const run = await addRun(await byId('a1'), 'retrying');
      expect(await queue.claimEvents(10)).toEqual([]);
      await db.write((m) => m.update(ActionRunEntity, { id: run }, { status: 'succeeded' }));
      expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['a2']);
    });
  });

  describe('claiming action runs', () => {
    it('takes only due runs, marks them running and counts the attempt', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const event = await byId('a');
      const due = await addRun(event, 'pending');
      await addRun(event, 'retrying', new Date(clock.now().getTime() + 60_000).toISOString());
      const claimed = await queue.claimActionRuns(10, 5_000);
      expect(claimed.map((r) => [r.id, r.attempts])).toEqual([[due, 1]]);
      expect((await db.manager.findOneByOrFail(ActionRunEntity, { id: due })).status).toBe('running');
    });

    it('takes at most the limit it is asked for, whatever the limit, oldest due first', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const event = await byId('a');
      const runs: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        runs.push(await addRun(event, 'pending'));
        clock.advance(1);
      }
      expect((await queue.claimActionRuns(2, 5_000)).map((r) => r.id).sort()).toEqual(runs.slice(0, 2).sort());
      expect((await queue.claimActionRuns(10, 5_000)).map((r) => r.id)).toEqual([runs[2]]);
      // The limit is written into the statement on SQLite: anything but a whole number is refused, never spliced in.
      await expect(queue.claimActionRuns(1.5, 5_000)).rejects.toThrow(/whole number, got 1.5/);
      await expect(queue.claimEvents(-1)).rejects.toThrow(/whole number, got -1/);
    });

    it('takes a running run back when its holder’s lease has run out', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const id = await addRun(await byId('a'), 'pending');
      await new WorkQueue(db, clock).claimActionRuns(1, 5_000);
      expect(await queue.claimActionRuns(1, 5_000)).toEqual([]);
      clock.advance(5_001);
      expect((await queue.claimActionRuns(1, 5_000)).map((r) => [r.id, r.attempts])).toEqual([[id, 2]]);
    });

    it('looks for runs whose lease ran out once a second, not in every claim', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const id = await addRun(await byId('a'), 'pending');
      await new WorkQueue(db, clock).claimActionRuns(1, 100);
      expect(await queue.claimActionRuns(1, 5_000)).toEqual([]); // looked: the lease is live
      clock.advance(101);
      expect(await queue.claimActionRuns(1, 5_000)).toEqual([]); // ran out, but looked 101 ms ago
      clock.advance(899);
      expect((await queue.claimActionRuns(1, 5_000)).map((r) => [r.id, r.attempts])).toEqual([[id, 2]]);
    });

    it('gives back, after a storage fault, its leases on runs it is not performing, taken before a claim still in flight', async () => {
      await writer.write(anEvent({ eventId: 'a' }));
      const event = await byId('a');
      const dueAgo = (s: number) => new Date(clock.now().getTime() - s * 1_000).toISOString();
      const others = await addRun(event, 'pending', dueAgo(4));
      const abandoned = await addRun(event, 'pending', dueAgo(3));
      const performing = await addRun(event, 'retrying', dueAgo(2));
      const justTaken = await addRun(event, 'pending', dueAgo(1));
      const other = new WorkQueue(db, clock);
      expect((await other.claimActionRuns(1, 5_000)).map((r) => r.id)).toEqual([others]);
      expect((await queue.claimActionRuns(2, 5_000)).map((r) => r.id)).toEqual([abandoned, performing]);
      clock.advance(1);
      const claimStarted = clock.now().getTime(); // its runs are not known to the caller yet
      expect((await queue.claimActionRuns(1, 5_000)).map((r) => r.id)).toEqual([justTaken]);

      expect(await queue.releaseMyRuns(new Set([performing]), new Date(claimStarted + 5_000).toISOString())).toBe(1);
      const owners = new Map((await db.manager.find(ActionRunEntity)).map((r) => [r.id, r.leaseOwner]));
      expect([others, abandoned, performing, justTaken].map((id) => owners.get(id))).toEqual([other.owner, null, queue.owner, queue.owner]);
      // Taken again at once, as a new attempt, not when its lease would have run out.
      expect((await queue.claimActionRuns(10, 5_000)).map((r) => [r.id, r.attempts])).toEqual([[abandoned, 2]]);
    });
  });

  if (kind.name === 'postgres') {
    describe('on PostgreSQL', () => {
      // 1765500000000-postgres-hot-leases.ts: no index reads lease_owner or lease_until there, and pages keep room
      // (with an index on either, no lease would be heap-only).
      it('leases events with heap-only updates, which write no index entry', async () => {
        for (let i = 0; i < 20; i++) await writer.write(anEvent({ resourceKey: `task:tsk_${i}` }));
        const counts = await db.write(async (m) => {
          const sql = statementsOf(m);
          expect(await queue.claimEventsIn(sql, 20)).toHaveLength(20);
          const [row] = await sql.rows<{ updated: string; hot: string }>(
            `SELECT pg_stat_get_xact_tuples_updated('events'::regclass) AS updated, pg_stat_get_xact_tuples_hot_updated('events'::regclass) AS hot`,
          );
          return { updated: Number(row?.updated), hot: Number(row?.hot) };
        });
        // All but those whose page was full to its fill factor, whose new version goes to another page.
        expect(counts.updated).toBe(20);
        expect(counts.hot).toBeGreaterThanOrEqual(15);
      });
    });
  }

  describe('several claimers at once', () => {
    it('never gives the same event to two of them', async () => {
      await Promise.all(Array.from({ length: 200 }, () => writer.write(anEvent())));
      const queues = Array.from({ length: 4 }, () => new WorkQueue(db, clock));
      const claimed: string[] = [];
      for (;;) {
        const rounds = await Promise.all(queues.map((q) => q.claimEvents(7)));
        const got = rounds.flat().map((e) => e.event_id);
        if (got.length === 0) break;
        claimed.push(...got);
      }
      expect(claimed).toHaveLength(200);
      expect(new Set(claimed).size).toBe(200);
    });
  });
});

describe.each(kinds)(`${EventWriter.name} on $name`, (kind) => {
  let testDb: TestDatabase;
  let db: Database;
  let writer: EventWriter;

  beforeEach(async () => {
    testDb = await kind.create();
    db = await openDatabase(testDb.url);
    writer = new EventWriter(db, new ManualClock());
  });

  afterEach(async () => {
    await db.dataSource.destroy();
    await testDb.drop();
  });

  it('accepts an event once and calls every redelivery a duplicate, even within one batch', async () => {
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => writer.write(anEvent({ eventId: 'same' }))));
    expect(outcomes.sort()).toEqual(['accepted', 'duplicate', 'duplicate', 'duplicate', 'duplicate']);
    expect(await writer.write(anEvent({ eventId: 'same' }))).toBe('duplicate');
    expect(await db.manager.countBy(EventEntity, { eventId: 'same' })).toBe(1);
  });

  it('stores every event of a burst, batching many into few transactions', async () => {
    const committed: number[] = [];
    writer.onCommitted(() => committed.push(1));
    const outcomes = await Promise.all(Array.from({ length: 1_200 }, () => writer.write(anEvent())));
    expect(outcomes.every((o) => o === 'accepted')).toBe(true);
    expect(await db.manager.count(EventEntity)).toBe(1_200);
    expect(committed.length).toBeLessThan(1_200 / 10);
  });
});
