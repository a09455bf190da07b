/**
 * GET /admin/replicas (SPEC section 12, issue 9): the engine processes on one
 * database, as each registers and heartbeats. An engine lists itself as alive
 * with its host, pid and version and the work it has done; a restarted engine
 * lists its earlier run as stopped; a replica whose heartbeat stands still is
 * listed dead and the work it held is taken over within seconds, not when its
 * leases run out. Metrics carry the replica's identity.
 */
import { hostname } from 'node:os';
import { EventWriter } from '../src/intake/event-writer.js';
import { queryRows } from '../src/database/sql.js';
import { ENGINE_VERSION } from '../src/version.js';
import { notYet } from './support/admin.js';
import { databasesUnderTest } from './support/databases.js';
import type { RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { openDatabase } from './support/storage.js';
import { waitUntil } from './support/wait.js';

const FAST = { REPLICA_HEARTBEAT_MS: '200', REPLICA_DEAD_AFTER_MS: '1000' };
const GHOST = '00000000-0000-4000-8000-000000000001';

interface Replica {
  id: string;
  self: boolean;
  status: string;
  host: string;
  pid: number;
  version: string;
  heartbeat_at: string;
  work_in_hand: { events: number; action_runs: number };
  events_done: number;
  action_runs_done: number;
}

async function replicas(engine: RunningEngine): Promise<Replica[]> {
  const res = await engine.admin('/admin/replicas');
  expect(res.status).toBe(200);
  return ((await body(res)) as { replicas: Replica[] }).replicas;
}

const kinds = await databasesUnderTest('admin replicas');

describe.each(kinds)('GET /admin/replicas on $name', (kind) => {
  const rig = useRig(kind);

  it('answers 401 without the admin token, and with a wrong one', async () => {
    const engine = await rig.start([], FAST);
    expect((await fetch(`${engine.url}/admin/replicas`)).status).toBe(401);
    expect((await fetch(`${engine.url}/admin/replicas`, { headers: { Authorization: 'Bearer not-the-admin-token-at-all' } })).status).toBe(401);
  });

  it('lists the engine itself as alive, with its host, pid and version, and the events it has done', async () => {
    const engine = await rig.start([], FAST);
    const [self] = await replicas(engine);
    expect(self).toMatchObject({ self: true, status: 'alive', host: hostname(), pid: process.pid, version: ENGINE_VERSION, work_in_hand: { events: 0, action_runs: 0 } });

    const event = aTaskEvent('task.updated');
    expect((await deliver(engine.url, event)).status).toBe(202);
    const after = await waitUntil(async () => {
      const [now] = await replicas(engine);
      return now.events_done >= 1 ? now : notYet(`events_done ${now.events_done}`);
    }, { what: 'the event to be counted as done' });
    expect(after.heartbeat_at > self.heartbeat_at).toBe(true);

    const metrics = await (await fetch(`${engine.url}/metrics`)).text();
    expect(metrics).toContain(`engine_replica_info{replica="${self.id}",host="${hostname()}",version="${ENGINE_VERSION}"} 1`);
    expect(metrics).toMatch(/engine_replicas\{status="alive"\} 1\n/);
  });

  it('lists an earlier run of the engine on the same database as stopped', async () => {
    const first = await rig.start([], FAST);
    const [earlier] = await replicas(first);
    await first.stop();
    const second = await rig.start([], FAST);
    expect((await replicas(second)).map(({ id, self, status }) => ({ id, self, status }))).toEqual([
      { id: expect.not.stringMatching(earlier.id), self: true, status: 'alive' },
      { id: earlier.id, self: false, status: 'stopped' },
    ]);
  });

  it('lists a replica whose heartbeat stopped as dead, and takes over the event it held within seconds', async () => {
    // Left by a replica that is gone: a registration and an event it leased for an hour.
    const db = await openDatabase(rig.db.url);
    const now = new Date().toISOString();
    const event = aTaskEvent('task.updated');
    await new EventWriter(db, { now: () => new Date() }).write({ eventId: event.id!, type: event.type, resourceKey: null, source: 'webhook', payload: JSON.stringify(event) });
    await db.write(async (manager) => {
      await queryRows(manager, `UPDATE events SET lease_owner = ?, lease_until = ? WHERE event_id = ?`, [GHOST, new Date(Date.now() + 3_600_000).toISOString(), event.id]);
      await queryRows(manager, `INSERT INTO replicas (id, host, pid, version, started_at, heartbeat_at, events_done, action_runs_done) VALUES (?, 'elsewhere', 1, '0.0.9', ?, ?, 7, 3)`, [GHOST, now, now]);
    });
    await db.dataSource.destroy();

    const engine = await rig.start([], FAST);
    const started = Date.now();
    const ghost = await waitUntil(async () => {
      const found = (await replicas(engine)).find((r) => r.id === GHOST);
      return found?.status === 'dead' ? found : notYet(`the ghost is ${found?.status}`);
    }, { what: 'the replica that stopped heartbeating to be listed dead' });
    expect(ghost).toMatchObject({ self: false, host: 'elsewhere', version: '0.0.9', events_done: 7, action_runs_done: 3, work_in_hand: { events: 0, action_runs: 0 } });
    const detail = await waitUntil(async () => {
      const found = await body(engine.admin(`/admin/events/${encodeURIComponent(event.id!)}`));
      return found.status !== 'received' ? found : notYet(`event ${found.status}`);
    }, { what: 'the ghost\'s event to be evaluated' });
    expect(detail.status).toBe('ignored');
    expect(Date.now() - started).toBeLessThan(10_000);
    // On SQLite the engine's start-up hands back every earlier lease (one process per file); on PostgreSQL the takeover does.
    const said = engine.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.replica === GHOST);
    expect(said).toEqual([expect.objectContaining({ msg: 'replica declared dead, its work taken over', events: kind.name === 'postgres' ? 1 : 0, actionRuns: 0 })]);
    const metrics = await (await fetch(`${engine.url}/metrics`)).text();
    expect(metrics).toMatch(/engine_replicas\{status="dead"\} 1\n/);
  });
});
