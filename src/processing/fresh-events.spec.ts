/**
 * Intake's commit leases the new events the event loop may evaluate at once
 * to this process in the INSERT that stores them (event-writer.ts, work-queue.ts `freshLease`), under the
 * claim's own conditions; the rest wait for a claim, and `anyClaimable` says
 * whether a claim would find anything. On a real database, both kinds.
 */
import { randomUUID } from 'node:crypto';
import { Socket } from 'node:net';
import { ActionRunEntity } from '../database/action-run.entity.js';
import type { Database } from '../database/database.service.js';
import { EventEntity } from '../database/event.entity.js';
import type { EventWriter, HeldBehind, NewEvent } from '../intake/event-writer.js';
import { statementsOf } from '../database/statements.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { useQueueStore, type ManualClock } from '../../test/support/storage.js';
import { EVENT_LEASE_MS, WorkQueue } from './work-queue.js';
import type { ClaimedEvent } from './work.js';

const kinds = await databasesUnderTest('fresh events handed over');

function anEvent(eventId: string, resourceKey: string | null = null): NewEvent {
  return { eventId, type: 'task.updated', resourceKey, source: 'webhook', payload: JSON.stringify({ id: eventId }) };
}

describe.each(kinds)('events handed over by intake on $name', (kind) => {
  const store = useQueueStore(kind);
  let db: Database;
  let clock: ManualClock;
  let writer: EventWriter;
  let queue: WorkQueue;
  let room: number;
  /** What each commit handed over: the leased events' ids, and whether some were left for a claim for want of room. */
  let taken: Array<{ ids: string[]; left: boolean }>;
  let leasedEvents: ClaimedEvent[];

  beforeEach(() => {
    ({ db, clock, writer, queue } = store);
    room = 100;
    taken = [];
    leasedEvents = [];
    writer.handOffTo({
      lease: () => queue.freshLease(room),
      take: (leased, complete) => {
        leasedEvents.push(...leased);
        taken.push({ ids: leased.map((e) => e.event_id), left: !complete });
      },
    });
  });

  const writeAll = (events: NewEvent[]) => Promise.all(events.map((event) => writer.write(event)));
  const holder = async (eventId: string) => (await db.manager.findOneByOrFail(EventEntity, { eventId })).leaseOwner;
  const handedIds = () => taken.flatMap((t) => t.ids).sort();

  it('leases the new events of a commit to this process and hands them over after it, with the columns a claim returns', async () => {
    await writeAll([anEvent('a', 'task:1'), anEvent('b', 'task:2'), anEvent('c')]);
    expect(taken).toEqual([{ ids: ['a', 'b', 'c'], left: false }]);
    const stored = await db.manager.findOneByOrFail(EventEntity, { eventId: 'a' });
    expect({ ...leasedEvents[0], seq: Number(leasedEvents[0].seq) }).toEqual({
      seq: stored.seq, event_id: 'a', type: 'task.updated', resource_key: 'task:1', payload: stored.payload, depth: 0, attempts: 0,
    });
    expect(await holder('a')).toBe(queue.owner);
    expect(await queue.claimEvents(10)).toEqual([]);
  });

  it('hands over the envelope intake parsed with the event, so that its evaluation need not parse the payload again', async () => {
    const envelope = { id: 'p', type: 'task.updated', data: { task: { id: 'p1' } } };
    await writeAll([{ ...anEvent('p', 'task:p1'), payload: JSON.stringify(envelope), envelope }, anEvent('q')]);
    expect(leasedEvents.map((e) => e.event_id)).toEqual(['p', 'q']);
    expect(leasedEvents[0].envelope).toBe(envelope);
    expect(leasedEvents[1]).not.toHaveProperty('envelope');
  });

  it('leaves the later of two events about one resource for a claim, in one commit or in two', async () => {
    await writeAll([anEvent('a1', 'task:1'), anEvent('a2', 'task:1'), anEvent('b1', 'task:2')]);
    await writer.write(anEvent('a3', 'task:1'));
    expect(taken).toEqual([{ ids: ['a1', 'b1'], left: false }, { ids: [], left: false }]);
    expect(await holder('a2')).toBeNull();
    // Still held by a1, leased and waiting: the claim finds nothing yet.
    expect(await queue.claimEvents(10)).toEqual([]);
  });

  it('leaves an event whose resource has an earlier event’s run unfinished', async () => {
    await writer.write(anEvent('a1', 'task:1'));
    const first = await db.manager.findOneByOrFail(EventEntity, { eventId: 'a1' });
    await db.write((m) => m.update(EventEntity, { eventId: 'a1' }, { status: 'processed', leaseOwner: null, leaseUntil: null }));
    const now = clock.now().toISOString();
    await db.write((m) =>
      m.insert(ActionRunEntity, {
        id: randomUUID(), executionId: randomUUID(), eventSeq: first.seq, resourceKey: 'task:1', ruleId: 'r', position: 0,
        actionId: null, type: 'task.update', status: 'pending', attempts: 0, nextAttemptAt: now, createdAt: now, updatedAt: now,
      }),
    );
    await writer.write(anEvent('a2', 'task:1'));
    expect(taken.at(-1)).toEqual({ ids: [], left: false });
  });

  const heldOf = (eventId: string) => leasedEvents.find((e) => e.event_id === eventId)?.held;

  it('leases a new resource in the scope of a create in flight held behind it, and one outside it not held', async () => {
    const receivedAt = new Date(clock.now().getTime() + 1).toISOString();
    await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:A' }, 10_000, 'task.create');
    clock.advance(1);
    await writeUnseen(writer, 'in-a', 'task:1', { project_id: 'A' });
    await writeUnseen(writer, 'in-b', 'task:2', { project_id: 'B' });
    expect(handedIds()).toEqual(['in-a', 'in-b']);
    expect(heldOf('in-a')).toEqual({ scope: { kind: 'task', parent: 'project:A' }, receivedAt });
    expect(heldOf('in-b')).toBeUndefined();
    expect(await holder('in-a')).toBe(queue.owner);
  });

  /** The events handed over held, oldest first, that WorkQueue.goneOn lets go now. */
  const goneOn = async () => {
    const held = leasedEvents.filter((e) => e.held !== undefined) as Array<ClaimedEvent & { held: HeldBehind }>;
    return (await db.write((m) => queue.goneOn(statementsOf(m), held))).map((e) => e.event_id);
  };

  it('lets the events held behind a create go once it has ended, in their scope only, those received before a later create too', async () => {
    const first = await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:A' }, 10_000, 'task.create');
    await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:B' }, 10_000, 'task.create');
    clock.advance(1);
    await writeUnseen(writer, 'a1', 'task:1', { project_id: 'A' });
    await writeUnseen(writer, 'b1', 'task:2', { project_id: 'B' });
    clock.advance(1);
    await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:A' }, 10_000, 'task.create');
    clock.advance(1);
    await writeUnseen(writer, 'a2', 'task:3', { project_id: 'A' });
    expect(leasedEvents.map((e) => [e.event_id, e.held !== undefined])).toEqual([['a1', true], ['b1', true], ['a2', true]]);
    expect(await goneOn()).toEqual([]);
    await db.write((m) => m.update(ActionRunEntity, { id: first }, { status: 'succeeded', leaseOwner: null, leaseUntil: null }));
    // a1 came before the second create in project A; a2 after it; b1's create in project B is still in flight.
    expect(await goneOn()).toEqual(['a1']);
  });

  it('lets them go when the create’s lease has run out (its attempt timed out), as the claim would', async () => {
    await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:A' }, 1_000, 'task.create');
    clock.advance(1);
    await writeUnseen(writer, 'a1', 'task:1', { project_id: 'A' });
    expect(await goneOn()).toEqual([]);
    clock.advance(1_000);
    expect(await goneOn()).toEqual(['a1']);
  });

  it('does not hold a resource already seen, nor one received before the create started', async () => {
    await writeUnseen(writer, 'early', 'task:1', { project_id: 'A' });
    clock.advance(1);
    await writeCreatingRun(db, clock, { kind: 'task', parent: 'project:A' }, 10_000, 'task.create');
    await db.write((m) => m.query(`INSERT INTO resource_snapshots (resource_key, payload, event_seq, updated_at) VALUES ('task:7', '{}', 1, 'x')`));
    clock.advance(1);
    await writeUnseen(writer, 'seen', 'task:7', { project_id: 'A' });
    expect(leasedEvents.map((e) => [e.event_id, e.held !== undefined])).toEqual([['early', false], ['seen', false]]);
  });

  it('stores the events it leases leased, and the others unleased, in one write each', async () => {
    await writeAll([anEvent('a1', 'task:1'), anEvent('a2', 'task:1')]);
    const leases = await db.manager.find(EventEntity, { order: { seq: 'ASC' } });
    expect(leases.map((e) => [e.eventId, e.leaseOwner, e.leaseUntil])).toEqual([
      ['a1', queue.owner, new Date(clock.now().getTime() + EVENT_LEASE_MS).toISOString()],
      ['a2', null, null],
    ]);
  });

  it('says a commit with a duplicate in it left events for a claim, and the claim takes the one a duplicate stood before', async () => {
    await writer.write(anEvent('old', 'task:9'));
    await db.write((m) => m.update(EventEntity, { eventId: 'old' }, { status: 'processed', leaseOwner: null, leaseUntil: null }));
    // The duplicate of 'old' comes first for task:9 in this commit: the new event about task:9 may be left unleased.
    await writeAll([anEvent('old', 'task:9'), anEvent('new', 'task:9'), anEvent('other', 'task:3')]);
    const last = taken.at(-1);
    expect(last?.left).toBe(true);
    expect(last?.ids).toContain('other');
    const claimed = (await queue.claimEvents(10)).map((e) => e.event_id);
    expect([...(last?.ids ?? []), ...claimed].filter((id) => id !== 'other')).toEqual(['new']);
  });

  it('leases no more than the room the event loop has; the rest go to a claim', async () => {
    room = 2;
    await writeAll(['a', 'b', 'c', 'd'].map((id) => anEvent(id)));
    expect(taken).toEqual([{ ids: ['a', 'b'], left: true }]);
    expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['c', 'd']);
  });

  if (kind.name === 'postgres') {
    it('on PostgreSQL commits a batch in one round trip: its INSERT leaves with the START and the COMMIT, in one write', async () => {
      await writeAll([anEvent('first', 'task:0')]); // a session of the pool connected, its statements prepared
      let writes = 0;
      const { _write: write, _writev: writev } = Socket.prototype as unknown as Record<'_write' | '_writev', (...args: unknown[]) => void>;
      // Every socket's writes: the pool's sessions are the only ones that write while the batch commits.
      Object.assign(Socket.prototype, {
        _write(this: Socket, ...args: unknown[]) { writes++; return write.apply(this, args); },
        _writev(this: Socket, ...args: unknown[]) { writes++; return writev.apply(this, args); },
      });
      try {
        await writeAll([anEvent('a', 'task:1'), anEvent('b', 'task:2')]);
      } finally {
        Object.assign(Socket.prototype, { _write: write, _writev: writev });
      }
      expect({ writes, handed: taken.at(-1) }).toEqual({ writes: 1, handed: { ids: ['a', 'b'], left: false } });
    });
  }
});

/** PostgreSQL has no such probe: the claim is its own (work-queue.ts ANY_CLAIMABLE_SQLITE says why). */
describe.each(kinds.filter((kind) => kind.name === 'sqlite'))('the probe before a claim on $name', (kind) => {
  const store = useQueueStore(kind);

  it('says no while every waiting event is leased, yes for an unleased one, not for a retry not due yet, yes for a lease that ran out', async () => {
    const { db, clock, writer, queue } = store;
    // Room for the first event only.
    let room = 1;
    writer.handOffTo({ lease: () => queue.freshLease(room--), take: () => undefined });
    await writer.write(anEvent('handed'));
    expect(await queue.anyClaimable()).toBe(false);
    await writer.write(anEvent('later'));
    expect(await queue.anyClaimable()).toBe(true);
    const inAMinute = new Date(clock.now().getTime() + 60_000).toISOString();
    await db.write((m) => m.update(EventEntity, { eventId: 'later' }, { nextAttemptAt: inAMinute }));
    expect(await queue.anyClaimable()).toBe(false);
    clock.advance(EVENT_LEASE_MS + 1); // the lease of 'handed' has run out
    expect(await queue.anyClaimable()).toBe(true);
    clock.advance(60_000); // and 'later' is due
    expect((await queue.claimEvents(10)).map((e) => e.event_id)).toEqual(['handed', 'later']);
    expect(await queue.anyClaimable()).toBe(false);
  });
});
