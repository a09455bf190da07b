/**
 * Cron rules (SPEC section 6). Each enabled rule with a `schedule` gets a cron
 * job (@nestjs/schedule's registry, the `cron` package's time zone and
 * daylight-saving handling). A tick becomes an ordinary event, `schedule.fired`
 * with the id `schedule:<rule id>:<scheduled_for>`: the id is the same on every
 * replica and after a restart within the tick, so the event store's uniqueness
 * makes each tick fire once. Missed ticks are not caught up.
 */
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CronJob, CronTime } from 'cron';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { CLOCK, type Clock } from '../clock.js';
import { RuleStateEntity } from '../database/rule-state.entity.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { EventWriter } from '../intake/event-writer.js';

const JOB_PREFIX = 'rule:';

/** The tick a job fired for: cron times fall on whole seconds and the library fires within 250 ms of them. */
export function scheduledFor(firedAt: Date): string {
  return new Date(Math.floor(firedAt.getTime() / 1000) * 1000).toISOString();
}

export function scheduleEventId(ruleId: string, tick: string): string {
  return `schedule:${ruleId}:${tick}`;
}

/** The next `count` ticks of a cron expression after `from`, in UTC ISO form. */
export function upcomingTicks(cron: string, timezone: string | undefined, from: Date, count: number): string[] {
  const time = new CronTime(cron, timezone ?? 'UTC');
  const ticks: string[] = [];
  let cursor = from;
  for (let i = 0; i < count; i++) {
    const next = time.getNextDateFrom(cursor, timezone ?? 'UTC').toJSDate();
    ticks.push(next.toISOString());
    cursor = next;
  }
  return ticks;
}

/** Enough for a tick a second through a stall of hours; a longer one names the fire after a tick that old. */
const MAX_MISSED_TICKS = 100_000;

/**
 * The tick a job that fires at `now` fires for: the one it was `planned` for,
 * or, when the event loop stalled past the ticks after it, the latest of those
 * (missed ticks are not caught up: a fire late by more than a period is the
 * tick now due, not the one missed).
 */
export function dueTick(time: CronTime, timezone: string | undefined, planned: Date, now: Date): Date {
  let tick = planned;
  for (let i = 0; i < MAX_MISSED_TICKS; i++) {
    const next = time.getNextDateFrom(tick, timezone ?? 'UTC').toJSDate();
    if (next.getTime() > now.getTime()) break;
    tick = next;
  }
  return tick;
}

@Injectable()
export class Schedules implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('schedules');
  /** What each job was built from, so an unchanged rule keeps its job across reloads. */
  private readonly specs = new Map<string, string>();

  constructor(
    private readonly rules: RuleRegistry,
    private readonly jobs: SchedulerRegistry,
    private readonly writer: EventWriter,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectRepository(RuleStateEntity) private readonly states: Repository<RuleStateEntity>,
  ) {}

  onApplicationBootstrap(): void {
    this.sync();
    this.rules.onChange(() => this.sync());
  }

  onApplicationShutdown(): void {
    for (const name of [...this.specs.keys()]) this.remove(name);
  }

  /** Makes the running jobs match the enabled schedule rules. */
  sync(): void {
    const wanted = new Map<string, LoadedRule>();
    for (const rule of this.rules.all()) {
      if (rule.enabled && rule.definition.schedule) wanted.set(JOB_PREFIX + rule.id, rule);
    }
    for (const name of [...this.specs.keys()]) if (!wanted.has(name)) this.remove(name);
    for (const [name, rule] of wanted) {
      const spec = JSON.stringify(rule.definition.schedule);
      if (this.specs.get(name) === spec) continue;
      this.remove(name);
      this.add(name, rule);
    }
  }

  private add(name: string, rule: LoadedRule): void {
    const { cron, timezone } = rule.definition.schedule!;
    // The tick is named after the time it was planned for, not the moment the
    // callback ran: a stalled event loop must not rename it (replicas would then
    // disagree on the id), unless it stalled past the next tick too: then the
    // fire is for the latest tick due (dueTick). cron plans the following tick
    // before calling onTick.
    let planned: Date | undefined;
    const job: CronJob = CronJob.from({
      cronTime: cron,
      timeZone: timezone ?? 'UTC',
      start: false,
      onTick: () => {
        const now = this.clock.now();
        const tick = planned === undefined ? now : dueTick(job.cronTime, timezone, planned, now);
        planned = job.nextDate().toJSDate();
        return this.fire(rule.id, tick);
      },
      errorHandler: (error) => this.logger.error(`schedule of rule ${rule.id} failed: ${(error as Error).message}`),
    });
    this.jobs.addCronJob(name, job);
    this.specs.set(name, JSON.stringify(rule.definition.schedule));
    planned = job.nextDate().toJSDate();
    job.start();
  }

  private remove(name: string): void {
    if (this.jobs.doesExist('cron', name)) this.jobs.deleteCronJob(name);
    this.specs.delete(name);
  }

  private async fire(ruleId: string, plannedFor: Date): Promise<void> {
    // Another replica may have disabled the rule since this one last looked: ask the database.
    const override = await this.states.findOneBy({ ruleId });
    if (override && !override.enabled) return;
    const tick = scheduledFor(plannedFor);
    const id = scheduleEventId(ruleId, tick);
    const payload = JSON.stringify({
      id,
      type: 'schedule.fired',
      created_at: this.clock.now().toISOString(),
      data: { rule_id: ruleId, scheduled_for: tick },
    });
    const outcome = await this.writer.write({ eventId: id, type: 'schedule.fired', resourceKey: null, source: 'schedule', payload });
    this.logger.debug({ msg: 'schedule fired', rule: ruleId, scheduled_for: tick, outcome });
  }
}
