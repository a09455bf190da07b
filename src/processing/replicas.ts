/**
 * This engine process as one of the replicas sharing the database (SPEC
 * sections 10 and 12). It registers at start under its work queue's lease
 * owner id, and every REPLICA_HEARTBEAT_MS writes its heartbeat (with the
 * events and action runs it has done) and looks at the others: one whose
 * heartbeat has stood still for REPLICA_DEAD_AFTER_MS (replicas.watch.ts) is
 * declared dead and its work handed back at once (replicas.takeover.ts), rather
 * than waiting for each of its leases to run out.
 *
 * A replica that finds itself declared dead (it was paused: SIGSTOP, a long
 * GC, a frozen VM) says so and is alive again from then on; the work it held
 * is not its any more, and what it still commits on that work changes nothing
 * (every commit is guarded by the lease owner). A graceful stop marks it
 * stopped. On SQLite the table holds just this process and the earlier runs of
 * the file; the same beat runs there (it finds nothing to take: start-up
 * already hands back the leases of earlier runs).
 */
import { hostname } from 'node:os';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { CLOCK, isoOf, nowIso, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { statementsOf } from '../database/statements.js';
import { Metrics } from '../observability/metrics.js';
import { ENGINE_VERSION } from '../version.js';
import { takeOver, type Takeover } from './replicas.takeover.js';
import { HeartbeatWatch, REPLICA_STATUSES, statusOf, type ReplicaRow } from './replicas.watch.js';
import { WorkQueue } from './work-queue.js';

const REGISTER = `
  INSERT INTO replicas (id, host, pid, version, started_at, heartbeat_at, events_done, action_runs_done)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
const HEARTBEAT = `UPDATE replicas SET heartbeat_at = ?, events_done = ?, action_runs_done = ? WHERE id = ? AND dead_at IS NULL`;
const REVIVE = `UPDATE replicas SET heartbeat_at = ?, events_done = ?, action_runs_done = ?, dead_at = NULL, stopped_at = NULL WHERE id = ?`;
const STOPPED = `UPDATE replicas SET heartbeat_at = ?, events_done = ?, action_runs_done = ?, stopped_at = ? WHERE id = ?`;
/** Replicas that ended a day ago or more are forgotten (rolling restarts would otherwise grow the list without end). */
const FORGET = `DELETE FROM replicas WHERE (stopped_at IS NOT NULL OR dead_at IS NOT NULL) AND heartbeat_at < ?`;
const FORGET_AFTER_MS = 24 * 3_600_000;

@Injectable()
export class Replicas implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('replicas');
  /** This replica's id: its work queue's lease owner. */
  readonly id: string;
  readonly host = hostname();
  private readonly watch: HeartbeatWatch;
  private eventsDone = 0;
  private actionRunsDone = 0;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private running = false;
  private failing = false;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly queue: WorkQueue,
    private readonly metrics: Metrics,
  ) {
    this.id = queue.owner;
    this.watch = new HeartbeatWatch(config.replicaDeadAfterMs);
    metrics.replicaInfo.set({ replica: this.id, host: this.host, version: ENGINE_VERSION }, 1);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.register();
    this.running = true;
    this.schedule();
  }

  /** Before the database closes; on the SIGTERM path the workers have drained by then (app.ts stopApp). */
  async beforeApplicationShutdown(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.beating;
    await this.write(STOPPED, [this.now(), this.eventsDone, this.actionRunsDone, this.now(), this.id]).catch(() => undefined);
  }

  /** Events this replica finished evaluating (reported at the next heartbeat). */
  countEvents(n: number): void {
    this.eventsDone += n;
  }

  /** Action runs this replica brought to an end (reported at the next heartbeat). */
  countActionRuns(n: number): void {
    this.actionRunsDone += n;
  }

  async register(): Promise<void> {
    const now = this.now();
    await this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      await sql.run(FORGET, [new Date(this.clock.now().getTime() - FORGET_AFTER_MS).toISOString()]);
      await sql.run(REGISTER, [this.id, this.host, process.pid, ENGINE_VERSION, now, now, this.eventsDone, this.actionRunsDone]);
    });
  }

  /** One heartbeat: this replica's row, then the others'; what was taken over from replicas found dead. */
  async beat(): Promise<Takeover[]> {
    const now = this.clock.now();
    await this.heartbeat(isoOf(now));
    const rows = await queryRows<ReplicaRow>(this.db.manager, 'SELECT id, heartbeat_at, stopped_at, dead_at FROM replicas');
    const others = rows.filter((row) => row.id !== this.id && statusOf(row) === 'alive');
    const taken: Takeover[] = [];
    for (const stale of this.watch.stale(others, now.getTime())) {
      const takeover = await takeOver(this.db, stale, isoOf(now));
      if (takeover === undefined) continue; // it beat meanwhile, or another replica took it first
      if (takeover.actionRuns > 0) this.queue.recoverRunsNow();
      this.logger.warn({ msg: 'replica declared dead, its work taken over', ...takeover, heartbeatAt: stale.heartbeat_at });
      taken.push(takeover);
    }
    const dead = new Set(taken.map(({ replica }) => replica));
    const statuses = rows.map((row) => (dead.has(row.id) ? 'dead' : statusOf(row)));
    for (const status of REPLICA_STATUSES) this.metrics.replicas.set({ status }, statuses.filter((s) => s === status).length);
    return taken;
  }

  private async heartbeat(now: string): Promise<void> {
    const counts = [this.eventsDone, this.actionRunsDone];
    if ((await this.write(HEARTBEAT, [now, ...counts, this.id])) === 1) return;
    if ((await this.write(REVIVE, [now, ...counts, this.id])) === 1) {
      this.logger.warn({
        msg: 'this replica was declared dead (its heartbeat stopped: paused?); alive again, the work it held went to the others',
        replica: this.id,
      });
      return;
    }
    await this.register(); // the row is gone (forgotten, or the table was emptied)
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.beating = this.beatOrSayWhy().finally(() => {
        if (this.running) this.schedule();
      });
    }, this.config.replicaHeartbeatMs);
    this.timer.unref();
  }

  /** A beat that fails (the database is down) is said once, not every second; the next one tries again, judging no one until its wait is over again. */
  private async beatOrSayWhy(): Promise<void> {
    try {
      await this.beat();
      this.failing = false;
    } catch (error) {
      if (!this.failing) this.logger.warn({ msg: 'heartbeat failed; trying again', replica: this.id, error: (error as Error).message });
      this.failing = true;
      this.watch.forget();
    }
  }

  private write(sql: string, params: unknown[]): Promise<number> {
    return this.db.write((manager) => statementsOf(manager).run(sql, params));
  }

  private now(): string {
    return nowIso(this.clock);
  }
}
