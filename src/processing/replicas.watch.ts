/**
 * Who has stopped heartbeating, decided from what this process saw rather
 * than by comparing clocks: a replica is stale once its heartbeat has not
 * changed for REPLICA_DEAD_AFTER_MS by this process's own clock. Each replica
 * writes its heartbeat with its own clock; judged against another host's clock,
 * a replica whose clock runs a few seconds behind would look dead at every beat
 * and lose its work every second. (A survivor that has just started therefore
 * waits REPLICA_DEAD_AFTER_MS before it declares anyone dead.)
 */

export type ReplicaStatus = 'alive' | 'dead' | 'stopped';

/** A row of `replicas`, as read (PostgreSQL gives bigints as strings). */
export interface ReplicaRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  started_at: string;
  heartbeat_at: string;
  stopped_at: string | null;
  dead_at: string | null;
  events_done: number | string;
  action_runs_done: number | string;
}

export const REPLICA_STATUSES: readonly ReplicaStatus[] = ['alive', 'dead', 'stopped'];

/** Stopped: it said goodbye; dead: the others saw its heartbeat stop (a replica that comes back is alive again). */
export function statusOf(row: Pick<ReplicaRow, 'stopped_at' | 'dead_at'>): ReplicaStatus {
  if (row.stopped_at !== null) return 'stopped';
  return row.dead_at !== null ? 'dead' : 'alive';
}

/** A replica's heartbeat as seen: the value its row held, compared when the others take its work (replicas.takeover.ts). */
export interface SeenHeartbeat {
  id: string;
  heartbeat_at: string;
}

export class HeartbeatWatch {
  /** Each replica's heartbeat value, and when (this process's clock, ms) it was first seen with that value. */
  private readonly seen = new Map<string, { heartbeat: string; since: number }>();

  constructor(private readonly deadAfterMs: number) {}

  /** Of the live replicas in `rows` (other than this one: leave it out), those whose heartbeat has not moved for deadAfterMs. */
  stale(rows: readonly SeenHeartbeat[], nowMs: number): SeenHeartbeat[] {
    const stale: SeenHeartbeat[] = [];
    const present = new Set<string>();
    for (const { id, heartbeat_at } of rows) {
      present.add(id);
      const last = this.seen.get(id);
      if (last === undefined || last.heartbeat !== heartbeat_at) this.seen.set(id, { heartbeat: heartbeat_at, since: nowMs });
      else if (nowMs - last.since >= this.deadAfterMs) stale.push({ id, heartbeat_at });
    }
    for (const id of [...this.seen.keys()]) if (!present.has(id)) this.seen.delete(id);
    return stale;
  }

  /**
   * Starts every wait again. After this process could not reach the database
   * itself, a heartbeat that did not move says nothing: the others could not
   * write theirs either (a database restart would otherwise end with every
   * replica declaring every other dead).
   */
  forget(): void {
    this.seen.clear();
  }
}
