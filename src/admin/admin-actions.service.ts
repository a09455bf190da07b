/** What an operator does to action runs: put a dead one back in the queue. */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { Database } from '../database/database.service.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { DomainError } from '../errors.js';
import { Workers } from '../processing/workers.js';

@Injectable()
export class AdminActionsService {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly workers: Workers,
  ) {}

  /** Puts a failed run back in the queue with its attempts reset; its execution resumes from it. */
  async retryFailed(id: string): Promise<ActionRunEntity> {
    const run = await this.db.write(async (manager) => {
      const failed = await manager.findOneBy(ActionRunEntity, { id });
      if (!failed) throw new DomainError('not_found', `no action run ${id}`);
      if (failed.status !== 'failed') {
        throw new DomainError('not_retryable', `action run ${id} is ${failed.status}; only failed runs can be retried`);
      }
      const now = this.clock.now().toISOString();
      Object.assign(failed, { status: 'pending', attempts: 0, nextAttemptAt: now, updatedAt: now, leaseOwner: null, leaseUntil: null });
      await manager.save(failed);
      await manager.update(ExecutionEntity, { id: failed.executionId }, { status: 'running', finishedAt: null, error: null });
      return failed;
    });
    this.workers.nudgeActions();
    return run;
  }
}
