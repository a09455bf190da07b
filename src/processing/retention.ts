/**
 * Daily pruning (RETENTION_DAYS): events, their executions and action runs older
 * than the retention period go, in small batches, each its own short
 * transaction, so intake never waits long behind a prune. Work still in
 * progress is never pruned, whatever its age.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { In } from 'typeorm';
import { setImmediate as yieldToIntake } from 'node:timers/promises';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { EventEntity } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { SELF_CAUSED_WINDOW_MS } from './loop-guard.js';
import { ResourceProvenanceEntity } from '../database/resource-provenance.entity.js';

export const PRUNE_BATCH = 500;
/** Snapshots read per transaction by the prune (SQLite: a span of rowids; PostgreSQL: pages of about 30 rows each). */
export const SNAPSHOT_SLICE_ROWS = 5_000;
export const SNAPSHOT_SLICE_PAGES = 200;

@Injectable()
export class Retention {
  private readonly logger = new Logger('retention');

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
  ) {}

  @Cron(CronExpression.EVERY_DAY_AT_3AM)
  async daily(): Promise<void> {
    try {
      await this.prune();
    } catch (error) {
      this.logger.error(`pruning failed: ${(error as Error).message}`);
    }
  }

  /** Returns how many events were pruned. */
  async prune(): Promise<number> {
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - this.config.retentionDays * 86_400_000).toISOString();
    let pruned = 0;
    for (;;) {
      const seqs = await this.oldFinishedEvents(cutoff);
      if (seqs.length === 0) break;
      await this.db.write(async (manager) => {
        // An action run's event is its execution's: found through the executions' index by event and the runs' by
        // execution. No index holds runs by event alone, and by `event_seq` this DELETE read every run, once a batch.
        await manager
          .createQueryBuilder()
          .delete()
          .from(ActionRunEntity)
          .where('execution_id IN (SELECT id FROM executions WHERE event_seq IN (:...seqs))', { seqs })
          .execute();
        await manager.delete(ExecutionEntity, { eventSeq: In(seqs) });
        await manager.delete(EventEntity, { seq: In(seqs) });
      });
      pruned += seqs.length;
      await yieldToIntake();
    }
    await this.pruneSnapshots(cutoff);
    await this.pruneProvenance(new Date(now.getTime() - SELF_CAUSED_WINDOW_MS).toISOString());
    if (pruned > 0) this.logger.log({ msg: 'pruned old events', events: pruned, before: cutoff });
    return pruned;
  }

  /**
   * Snapshots not updated since the cutoff. No index holds them by time (one would cost every event's snapshot an
   * entry more), so the table is read once, a slice of its rows at a time, each slice's DELETE its own short
   * transaction: SQLite by rowid, PostgreSQL by page (a TID range scan). One DELETE of them all read every snapshot
   * in one transaction, on SQLite on the event loop. Rows stored meanwhile lie past the last slice, and are new.
   */
  private async pruneSnapshots(cutoff: string): Promise<void> {
    if (this.db.kind === 'postgres') {
      const [{ pages }] = await queryRows<{ pages: number | string }>(
        this.db.manager, `SELECT pg_relation_size('resource_snapshots') / current_setting('block_size')::int AS pages`);
      for (let page = 0; page < Number(pages); page += SNAPSHOT_SLICE_PAGES) {
        await this.db.write((manager) => queryRows(manager,
          'DELETE FROM resource_snapshots WHERE ctid >= ?::tid AND ctid < ?::tid AND updated_at < ?',
          [`(${page},0)`, `(${page + SNAPSHOT_SLICE_PAGES},0)`, cutoff]));
        await yieldToIntake();
      }
      return;
    }
    const [span] = await queryRows<{ low: number | null; high: number | null }>(
      this.db.manager, 'SELECT (SELECT MIN(rowid) FROM resource_snapshots) AS low, (SELECT MAX(rowid) FROM resource_snapshots) AS high');
    if (span.low === null || span.high === null) return;
    for (let low = Number(span.low); low <= Number(span.high); low += SNAPSHOT_SLICE_ROWS) {
      await this.db.write((manager) => queryRows(manager,
        'DELETE FROM resource_snapshots WHERE rowid >= ? AND rowid < ? AND updated_at < ?', [low, low + SNAPSHOT_SLICE_ROWS, cutoff]));
      await yieldToIntake();
    }
  }

  /**
   * Provenance older than the self-caused window, oldest first through its index by time, PRUNE_BATCH at a time. The
   * time is tested again on the row deleted: on PostgreSQL an action's outcome may renew a row the batch chose before
   * the DELETE reaches it, and the DELETE then sees the new version, which must stay.
   */
  private async pruneProvenance(before: string): Promise<void> {
    for (;;) {
      const deleted = await this.db.write((manager) => manager
        .createQueryBuilder()
        .delete()
        .from(ResourceProvenanceEntity)
        .where(`changed_at < :before AND resource_key IN (
          SELECT resource_key FROM resource_provenance WHERE changed_at < :before ORDER BY changed_at LIMIT ${PRUNE_BATCH})`, { before })
        .execute());
      if ((deleted.affected ?? 0) < PRUNE_BATCH) return;
      await yieldToIntake();
    }
  }

  private async oldFinishedEvents(cutoff: string): Promise<number[]> {
    const rows = await queryRows<{ seq: number }>(
      this.db.manager,
      `SELECT e.seq FROM events e
       WHERE e.received_at < ? AND e.status <> 'received'
         AND NOT EXISTS (SELECT 1 FROM executions x JOIN action_runs a ON a.execution_id = x.id
                         WHERE x.event_seq = e.seq AND a.status IN ('pending', 'running', 'retrying'))
       ORDER BY e.seq LIMIT ?`,
      [cutoff, PRUNE_BATCH],
    );
    return rows.map((r) => Number(r.seq));
  }
}
