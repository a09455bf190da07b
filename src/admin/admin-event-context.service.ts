/**
 * What the console shows beside an event's detail (GET /admin/events/:id):
 * its place in the chain of engine-caused events, why it still waits, each
 * attempt of its action runs this process remembers, and for a throttled
 * execution the key and the limit that held it back. The facts behind "why did
 * this not act?", gathered in one answer so the console never has to guess.
 */
import { Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { ActionRunEntity } from '../database/action-run.entity.js';
import { EventEntity } from '../database/event.entity.js';
import { ExecutionEntity } from '../database/execution.entity.js';
import { DomainError } from '../errors.js';
import { AttemptJournal } from '../console/attempt-journal.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import { causeOf, consequencesOf } from './event-chain.js';
import { whyWaiting } from './event-waiting.js';

@Injectable()
export class AdminEventContextService {
  constructor(
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    @InjectRepository(ExecutionEntity) private readonly executions: Repository<ExecutionEntity>,
    @InjectRepository(ActionRunEntity) private readonly runs: Repository<ActionRunEntity>,
    private readonly journal: AttemptJournal,
    private readonly registry: RuleRegistry,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  async context(id: string) {
    const event = await this.events.findOneBy({ eventId: id });
    if (!event) throw new DomainError('not_found', `no event with id ${id}`);
    const executions = await this.executions.find({ where: { eventSeq: event.seq } });
    const runs = executions.length ? await this.runs.find({ where: { executionId: In(executions.map((x) => x.id)) } }) : [];
    const manager = this.events.manager;
    return {
      id: event.eventId,
      self_caused: event.selfCaused,
      depth: event.depth,
      max_chain_depth: this.config.maxChainDepth,
      dry_run: this.config.dryRun,
      caused_by: await causeOf(manager, event),
      caused: await consequencesOf(manager, event, runs),
      waiting: await whyWaiting(manager, event, this.clock.now()),
      throttled: executions.filter((x) => x.status === 'throttled').map((x) => this.throttleOf(x)),
      attempts: Object.fromEntries(runs.map((r) => [r.id, this.journal.attemptsOf(r.id) ?? null])),
    };
  }

  private throttleOf(execution: ExecutionEntity) {
    const throttle = this.registry.get(execution.ruleId)?.definition.options?.throttle;
    return {
      execution: execution.id,
      rule: execution.ruleId,
      key: execution.throttleKey,
      limit: throttle?.limit ?? null,
      window_seconds: throttle?.windowSeconds ?? null,
    };
  }
}
