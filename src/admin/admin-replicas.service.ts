/** GET /admin/replicas: the replicas registered on the database, what each holds and has done (processing/replicas.ts). */
import { Injectable } from '@nestjs/common';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { Replicas } from '../processing/replicas.js';
import { workInHand } from '../processing/replicas.takeover.js';
import { statusOf, type ReplicaRow } from '../processing/replicas.watch.js';

@Injectable()
export class AdminReplicasService {
  constructor(
    private readonly db: Database,
    private readonly replicas: Replicas,
  ) {}

  /** Alive ones first, then the newest. */
  async list() {
    const rows = await queryRows<ReplicaRow>(
      this.db.manager,
      `SELECT id, host, pid, version, started_at, heartbeat_at, stopped_at, dead_at, events_done, action_runs_done
       FROM replicas ORDER BY started_at DESC, id`,
    );
    const work = await workInHand(this.db);
    const items = rows.map((row) => {
      const held = work.get(row.id) ?? { events: 0, actionRuns: 0 };
      return {
        id: row.id,
        self: row.id === this.replicas.id,
        status: statusOf(row),
        host: row.host,
        pid: Number(row.pid),
        version: row.version,
        started_at: row.started_at,
        heartbeat_at: row.heartbeat_at,
        stopped_at: row.stopped_at,
        dead_at: row.dead_at,
        work_in_hand: { events: held.events, action_runs: held.actionRuns },
        events_done: Number(row.events_done),
        action_runs_done: Number(row.action_runs_done),
      };
    });
    return { replicas: [...items.filter((r) => r.status === 'alive'), ...items.filter((r) => r.status !== 'alive')] };
  }
}
