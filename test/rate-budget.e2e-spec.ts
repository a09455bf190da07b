/**
 * Waiting is not holding, end to end: with the rate budget used up, the
 * engine's workers leave the runs it cannot start in the database, waiting and
 * unclaimed, instead of claiming them and holding their leases while they wait.
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
  created_at: string;
  updated_at: string;
}

describe.each(kinds)('a used-up rate budget on $name', (kind) => {
  const rig = useRig(kind);

  it('leaves the runs it cannot start waiting in the database, unclaimed, and sends only what the budget allows', async () => {
    const engine = await rig.start([review], { SERVICE_RATE_LIMIT_PER_MINUTE: '2' });
    const db = engine.app.get(Database);
    const runs = () => db.dataSource.query('SELECT status, attempts, lease_owner, created_at, updated_at FROM action_runs ORDER BY created_at') as Promise<RunRow[]>;
    for (const title of ['a', 'b', 'c', 'd']) await deliver(engine.url, aTaskEvent('task.completed', { title }));

    const settled = await waitUntil(
      async () => {
        const rows = await runs();
        return rows.length === 4 && rows.filter((r) => r.status === 'succeeded').length === 2 ? rows : undefined;
      },
      { what: 'four runs, two of them sent' },
    );
    const waiting = settled.filter((r) => r.status !== 'succeeded');
    // Never claimed: a claim counts an attempt and leases the run, and handing it back rewrites updated_at.
    expect(waiting.map((r) => [r.status, Number(r.attempts), r.lease_owner, r.updated_at === r.created_at])).toEqual([
      ['pending', 0, null, true],
      ['pending', 0, null, true],
    ]);
    expect(rig.sim.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
  });
});
