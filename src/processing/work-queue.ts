/**
 * Claiming work from the database, the same way on SQLite and PostgreSQL.
 *
 * Work is a row (an event to evaluate, an action run to perform) that a worker
 * takes by writing a lease on it in one UPDATE … WHERE id IN (SELECT … LIMIT n)
 * … RETURNING statement. On PostgreSQL the inner SELECT adds FOR UPDATE SKIP
 * LOCKED, so replicas sharing the database never take the same row and never
 * wait on each other; SQLite has one writer, which makes the statement atomic by
 * itself. A lease expires: work held by a process that died is taken again by
 * whoever claims next, and because the work's results are committed together
 * with the status change that ends it (guarded by the lease owner), it is done
 * once.
 *
 * Per-resource order: an event is claimable only when no earlier event about the
 * same resource is still waiting and no earlier event's action runs on it are
 * unfinished.
 *
 * Causal barrier: an event about a resource the engine has not seen before
 * (`seen_resource` false: no snapshot of it) is not claimed while an action
 * that creates resources, started before the event arrived, is still in flight. The service can send the webhook about a resource
 * an action created before the engine has recorded the action's answer, and so
 * the resource's provenance; waiting for those runs (at most SERVICE_TIMEOUT_MS)
 * lets loop protection see the resources the engine made. (Actions that change
 * an existing resource record it before they send, so they need no barrier.) A run whose attempt timed out is not waited for: the service may
 * have acted, but a run can retry for minutes and nothing else would move
 * meanwhile. Its resource is then seen as an outside one, which costs at most one
 * extra link per timed-out attempt (README, Guarantees).
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, isoIn, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { statementsOf } from '../database/statements.js';
import { CREATING_ACTIONS } from '../actions/action-types.js';
import type { ClaimedActionRun, ClaimedEvent, HandOff } from './work.js';

/** Evaluating an event takes milliseconds, lookups included; a dead holder's events wait this long. */
export const EVENT_LEASE_MS = 15_000;
const SLOW_CLAIM_MS = 20;
/** At most this often: a table that grows by thousands of rows a second outgrows its statistics in seconds. */
const ANALYZE_EVERY_MS = 5_000;

/**
 * The first event received after the oldest action run that may have acted
 * unbeknownst to the engine; events from it on wait. Computed once per claim
 * (uncorrelated), and as a seq bound, so the claim's index scan stops there
 * instead of testing every waiting event.
 */
const BARRIER_SEQ = `COALESCE(
  (SELECT x.seq FROM events x
   WHERE x.received_at >= (SELECT MIN(r.created_at) FROM action_runs r
                           WHERE r.status = 'running' AND r.type IN (${CREATING_ACTIONS.map((t) => `'${t}'`).join(', ')}))
   ORDER BY x.received_at, x.seq LIMIT 1),
  2147483647)`;

@Injectable()
export class WorkQueue {
  /** Identifies this process's leases. */
  readonly owner = randomUUID();
  private analyzedAt = 0;

  constructor(
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  private get skipLocked(): string {
    return this.db.kind === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '';
  }

  async claimEvents(limit: number): Promise<ClaimedEvent[]> {
    const now = this.clock.now().toISOString();
    const lease = [this.owner, isoIn(this.clock, EVENT_LEASE_MS)];
    const params = [...lease, now, now, limit, now, now, limit, now, limit];
    const started = performance.now();
    const rows = await this.db.write((manager) => statementsOf(manager).rows<ClaimedEvent>(this.claimEventsSql, params));
    this.refreshStatistics(performance.now() - started >= SLOW_CLAIM_MS || rows.length === limit);
    return rows.sort((a, b) => a.seq - b.seq);
  }

  /**
   * The candidates come from two index scans that each stop after `limit`
   * rows: waiting events before the barrier, and waiting events after it
   * about seen resources (which never wait for it: a partial index holds just
   * those). Events that must wait for the barrier are never scanned, however
   * many there are.
   */
  private get claimEventsSql(): string {
    // SQLite would rather walk the status index and filter (it keeps no statistics): point it at the partial index.
    const seenIndex = this.db.kind === 'sqlite' ? 'INDEXED BY idx_events_waiting_seen' : '';
    const claimable = (seqBound: string, index = '') => `
      SELECT e.seq FROM events e ${index}
      WHERE e.status = 'received' AND ${seqBound} AND e.next_attempt_at <= ?
        AND (e.lease_until IS NULL OR e.lease_until < ?)
        AND NOT EXISTS (SELECT 1 FROM events p
                        WHERE p.resource_key = e.resource_key AND p.status = 'received' AND p.seq < e.seq)
        AND NOT EXISTS (SELECT 1 FROM action_runs a
                        WHERE a.resource_key = e.resource_key AND a.event_seq < e.seq
                          AND a.status IN ('pending', 'running', 'retrying'))
      ORDER BY e.seq LIMIT ?`;
    return `
      UPDATE events SET lease_owner = ?, lease_until = ?
      WHERE seq IN (
        SELECT c.seq FROM events c
        WHERE c.seq IN (SELECT seq FROM (${claimable(`e.seq < ${BARRIER_SEQ}`)}) before_barrier
                        UNION ALL
                        SELECT seq FROM (${claimable(`e.seen_resource AND e.seq >= ${BARRIER_SEQ}`, seenIndex)}) seen)
          -- Checked again on the row itself: on PostgreSQL a row another claimer has just leased is re-read here.
          AND c.status = 'received' AND (c.lease_until IS NULL OR c.lease_until < ?)
        ORDER BY c.seq LIMIT ? ${this.skipLocked})
      RETURNING seq, event_id, type, resource_key, payload, depth, attempts`;
  }

  /**
   * PostgreSQL plans the claim from table statistics; when a backlog builds up
   * faster than autovacuum refreshes them (a burst, a new database), the plan
   * turns quadratic, and intake's check for a seen resource scans every
   * snapshot. A slow claim, or a busy queue (a full batch: the tables are
   * growing), asks for fresh statistics, at most every few seconds.
   */
  private refreshStatistics(wanted: boolean): void {
    if (this.db.kind !== 'postgres' || !wanted) return;
    const now = Date.now();
    if (now - this.analyzedAt < ANALYZE_EVERY_MS) return;
    this.analyzedAt = now;
    this.db.dataSource.query('ANALYZE events, action_runs, resource_snapshots, resource_provenance, executions').catch(() => undefined);
  }

  /** Takes due action runs and marks them running; `leaseMs` should outlast one request. */
  async claimActionRuns(limit: number, leaseMs: number): Promise<ClaimedActionRun[]> {
    const now = this.clock.now().toISOString();
    const sql = `
      UPDATE action_runs
      SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
      WHERE id IN (
        SELECT id FROM action_runs
        WHERE status IN ('pending', 'retrying', 'running') AND next_attempt_at <= ?
          AND (lease_until IS NULL OR lease_until < ?)
        ORDER BY next_attempt_at LIMIT ? ${this.skipLocked})
      RETURNING id, execution_id, event_seq, resource_key, rule_id, position, action_id, type, attempts, request`;
    const params = [this.owner, isoIn(this.clock, leaseMs), now, now, now, limit];
    return this.db.write((manager) => statementsOf(manager).rows<ClaimedActionRun>(sql, params));
  }

  /**
   * On SQLite exactly one engine process owns the file, so leases left by a
   * previous run of it are void at start-up: its work resumes at once instead
   * of after the lease runs out.
   */
  async releaseStaleLeases(): Promise<void> {
    if (this.db.kind !== 'sqlite') return;
    await this.db.write(async (manager) => {
      await queryRows(manager, `UPDATE events SET lease_owner = NULL, lease_until = NULL WHERE seq IN (SELECT seq FROM events INDEXED BY idx_events_leased WHERE lease_owner IS NOT NULL AND status = 'received')`);
      await queryRows(
        manager,
        `UPDATE action_runs SET lease_owner = NULL, lease_until = NULL
         WHERE id IN (SELECT id FROM action_runs INDEXED BY idx_action_runs_leased
                      WHERE lease_owner IS NOT NULL AND status IN ('pending', 'retrying', 'running'))`,
      );
    });
  }

  /** Gives back an event lease without changing anything else (shutdown). */
  async releaseMine(): Promise<void> {
    const sql = `UPDATE events SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ? AND status = 'received'`;
    await this.db.write((manager) => queryRows(manager, sql, [this.owner]));
  }

  /** How much work waits: events not yet evaluated, action runs not yet ended (the metrics' queue depths). */
  async depths(): Promise<{ events: number; actions: number }> {
    const [events] = await queryRows<{ n: number | string }>(this.db.manager, `SELECT COUNT(*) AS n FROM events WHERE status = 'received'`);
    const [runs] = await queryRows<{ n: number | string }>(
      this.db.manager,
      `SELECT COUNT(*) AS n FROM action_runs WHERE status IN ('pending', 'running', 'retrying')`,
    );
    return { events: Number(events?.n ?? 0), actions: Number(runs?.n ?? 0) };
  }

  /** Runs a commit may lease to this process directly, up to `room`, for as long as one attempt needs. */
  handOff(leaseMs: number, room: number): HandOff {
    return { owner: this.owner, until: isoIn(this.clock, leaseMs), room };
  }
}
