/**
 * Daily pruning (RETENTION_DAYS): events, their executions and action runs older
 * than the retention period go, in small batches, each its own short
 * transaction, so intake never waits long behind a prune. Work still in
 * progress is never pruned, whatever its age.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { In, LessThan } from 'typeorm';
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
import { ResourceSnapshotEntity } from '../database/resource-snapshot.entity.js';

export const PRUNE_BATCH = 500;

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
    await this.db.write(async (manager) => {
      await manager.delete(ResourceSnapshotEntity, { updatedAt: LessThan(cutoff) });
      await manager.delete(ResourceProvenanceEntity, { changedAt: LessThan(new Date(now.getTime() - SELF_CAUSED_WINDOW_MS).toISOString()) });
    });
    if (pruned > 0) this.logger.log({ msg: 'pruned old events', events: pruned, before: cutoff });
    return pruned;
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
