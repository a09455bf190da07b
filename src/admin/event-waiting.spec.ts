import type { Database } from '../database/database.service.js';
import { EventEntity } from '../database/event.entity.js';
import { EventWriter } from '../intake/event-writer.js';
import { databasesUnderTest } from '../../test/support/databases.js';
import { writeCreatingRun, writeUnseen } from '../../test/support/barrier.js';
import { useQueueStore, type ManualClock } from '../../test/support/storage.js';
import { whyWaiting } from './event-waiting.js';

const kinds = await databasesUnderTest('why an event waits');

describe.each(kinds)('why an event waits, on $name', (kind) => {
  const store = useQueueStore(kind);
  let db: Database;
  let clock: ManualClock;
  let writer: EventWriter;

  // After the store's own beforeEach, which opens a fresh database.
  beforeEach(() => {
    ({ db, clock, writer } = store);
  });

  const unseen = (eventId: string, resource: string, fields: Record<string, unknown> = {}) => writeUnseen(writer, eventId, resource, fields);
  const creating = (scope: { kind: string; parent: string | null }) => writeCreatingRun(db, clock, scope, 10_000);

  it('explains a held event: the runs it waits for, their scope and why', async () => {
    const run = await creating({ kind: 'task', parent: 'project:A' });
    await unseen('a1', 'task:1', { project_id: 'A' });
    await unseen('b1', 'task:2', { project_id: 'B' });
    const held = await whyWaiting(db.manager, await db.manager.findOneByOrFail(EventEntity, { eventId: 'a1' }), clock.now());
    expect(held).toEqual([
      expect.objectContaining({
        kind: 'causal_barrier',
        scope: { kind: 'task', parent: 'project:A' },
        why: expect.stringContaining('task:1'),
        runs: [expect.objectContaining({ id: run, type: 'task.create', creates_in: { kind: 'task', parent: 'project:A' } })],
      }),
    ]);
    const free = await whyWaiting(db.manager, await db.manager.findOneByOrFail(EventEntity, { eventId: 'b1' }), clock.now());
    expect(free).toEqual([{ kind: 'queued' }]);
  });

});
