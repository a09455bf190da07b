/**
 * Waiting is not holding, end to end: with the rate budget used up, the
 * engine's workers leave the runs it cannot start in the database, waiting,
 * instead of holding their leases while they wait; nothing is sent beyond it.
 */
import { Database } from '../src/database/database.service.js';
import { databasesUnderTest } from './support/databases.js';
import { aTaskEvent, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('rate budget');

const review = {
  id: 'review',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review {{ event.data.task.title }}' } }],
};

interface RunRow {
  status: string;
  attempts: number;
  lease_owner: string | null;
}

describe.each(kinds)('a used-up rate budget on $name', (kind) => {
  const rig = useRig(kind);

  it('leaves the runs it cannot start waiting in the database, holding nothing, and sends only what the budget allows', async () => {
    const engine = await rig.start([review], { SERVICE_RATE_LIMIT_PER_MINUTE: '2' });
    const db = engine.app.get(Database);
    const runs = () => db.dataSource.query('SELECT status, attempts, lease_owner FROM action_runs ORDER BY created_at') as Promise<RunRow[]>;
    for (const title of ['a', 'b', 'c', 'd']) await deliver(engine.url, aTaskEvent('task.completed', { title }));

    const settled = await waitUntil(
      async () => {
        const rows = await runs();
        return rows.length === 4 && rows.filter((r) => r.status === 'succeeded').length === 2 ? rows : undefined;
      },
      { what: 'four runs, two of them sent' },
    );
    const waiting = settled.filter((r) => r.status !== 'succeeded');
    // Waiting in the database, holding no lease and counting no attempt. (Normally never claimed at all: the
    // workers claim only what the budget can start, which action-runner.budget.spec.ts shows on a manual clock.
    // On a loaded machine a shared-budget grant can lapse between that check and the send; the run is then
    // handed back, which rewrites updated_at, so that is not asserted here.)
    expect(waiting.map((r) => [r.status, Number(r.attempts), r.lease_owner])).toEqual([
      ['pending', 0, null],
      ['pending', 0, null],
    ]);
    expect(rig.sim.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
  });
});
