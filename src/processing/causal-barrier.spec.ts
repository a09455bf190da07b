import type { CausalScope } from '../causal-scope.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import type { Database } from '../database/database.service.js';
import { EventWriter } from '../intake/event-writer.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { useQueueStore, type ManualClock } from '../../test/support/storage.js';
import { WorkQueue } from './work-queue.js';

const kinds = await databasesUnderTest('causal barrier');

const LEASE_MS = 10_000;

describe.each(kinds)('the causal barrier, scoped, on $name', (kind) => {
  const store = useQueueStore(kind);
  let db: Database;
  let clock: ManualClock;
  let writer: EventWriter;
  let queue: WorkQueue;

  // After the store's own beforeEach, which opens a fresh database.
  beforeEach(() => {
    ({ db, clock, writer, queue } = store);
  });

  const unseen = (eventId: string, resource: string, fields: Record<string, unknown> = {}) => writeUnseen(writer, eventId, resource, fields);
  const creating = (scope: CausalScope, type = 'task.create') => writeCreatingRun(db, clock, scope, LEASE_MS, type);

  const claimed = async () => (await queue.claimEvents(50)).map((e) => e.event_id);

  it('holds new tasks of the project a create is in flight in, and nothing else', async () => {
    const run = await creating({ kind: 'task', parent: 'project:A' });
    await unseen('a1', 'task:1', { project_id: 'A' });
    await unseen('b1', 'task:2', { project_id: 'B' });
    await unseen('p1', 'project:9');
    await unseen('u1', 'user:5', { email: 'x@example.com' });
    expect(await claimed()).toEqual(['b1', 'p1', 'u1']);
    await db.write((m) => m.update(ActionRunEntity, { id: run }, { status: 'succeeded', leaseOwner: null, leaseUntil: null }));
    expect(await claimed()).toEqual(['a1']);
  });

  it('holds an event whose parent cannot be told apart, and a create whose parent is unknown holds its whole kind', async () => {
    await creating({ kind: 'task', parent: 'project:A' });
    await creating({ kind: 'project', parent: null }, 'project.create');
    await unseen('t-no-project', 'task:3');
    await unseen('p1', 'project:9');
    await unseen('b1', 'task:2', { project_id: 'B' });
    expect(await claimed()).toEqual(['b1']);
  });

  it('does not hold events that arrived before the create started', async () => {
    await unseen('early', 'task:1', { project_id: 'A' });
    clock.advance(5);
    await creating({ kind: 'task', parent: 'project:A' });
    clock.advance(5);
    await unseen('late', 'task:2', { project_id: 'A' });
    expect(await claimed()).toEqual(['early']);
  });

  it('stops holding once the run’s lease has run out (its holder is gone), or its holder gave it back', async () => {
    const run = await creating({ kind: 'user', parent: 'email:x@example.com' });
    await unseen('u1', 'user:5', { email: 'X@Example.com ' });
    expect(await claimed()).toEqual([]);
    clock.advance(LEASE_MS + 1);
    expect(await claimed()).toEqual(['u1']);
    await unseen('u2', 'user:6', { email: 'x@example.com' });
    await db.write((m) => m.update(ActionRunEntity, { id: run }, { leaseUntil: new Date(clock.now().getTime() + LEASE_MS).toISOString() }));
    expect(await claimed()).toEqual([]);
    await db.write((m) => m.update(ActionRunEntity, { id: run }, { leaseOwner: null, leaseUntil: null }));
    expect(await claimed()).toEqual(['u2']);
  });

  it('claims an event outside every scope behind hundreds that must wait', async () => {
    await creating({ kind: 'task', parent: 'project:A' });
    for (let i = 0; i < 300; i++) await unseen(`a${i}`, `task:a${i}`, { project_id: 'A' });
    await unseen('b1', 'task:b1', { project_id: 'B' });
    expect(await claimed()).toEqual(['b1']);
  });
});
