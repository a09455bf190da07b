/** What an operator does to a waiting execution (SPEC 11): cancel it, or resume it now. */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { statementsOf } from '../database/statements.js';
import { DomainError } from '../errors.js';
import { cancelExecution, resumeExecution } from '../processing/waiting.js';
import { Workers } from '../processing/workers.js';

/** `cancelled_by` of an execution an operator cancelled. */
export const CANCELLED_BY_OPERATOR = 'admin';

@Injectable()
export class AdminExecutionsService {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly workers: Workers,
  ) {}

  /** A waiting execution is cancelled: nothing after its wait runs. 409 `not_waiting` otherwise (also when its resume won the race). */
  async cancel(id: string): Promise<void> {
    const done = await this.db.write((manager) => cancelExecution(statementsOf(manager), id, CANCELLED_BY_OPERATOR, this.now()));
    if (!done) await this.refuse(id, 'cancelled');
  }

  /** A waiting execution's wait ends now (a debounced one runs with the last event so far). 409 `not_waiting` otherwise. */
  async resume(id: string): Promise<void> {
    const done = await this.db.write((manager) => resumeExecution(statementsOf(manager), id, this.now()));
    if (!done) await this.refuse(id, 'resumed');
    this.workers.nudgeActions();
  }

  private async refuse(id: string, what: string): Promise<never> {
    const execution = await this.db.manager.findOneBy(ExecutionEntity, { id });
    if (!execution) throw new DomainError('not_found', `no execution ${id}`);
    throw new DomainError('not_waiting', `execution ${id} is ${execution.status}; only a waiting execution can be ${what}`);
  }

  private now(): string {
    return this.clock.now().toISOString();
  }
}
