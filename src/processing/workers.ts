/**
 * The two loops that move work along: one claims received events and evaluates
 * them, the other claims due action runs and performs them. Each sleeps when
 * there is nothing to do and is woken at once by whoever makes new work (intake
 * after a commit, the event loop after creating action runs, an action run that
 * finishes and so unblocks the next event on its resource); a short poll covers
 * work that becomes due by time (retries) or is created by another replica.
 *
 * This is the one catch boundary of processing: any throw while handling one
 * item is logged and recorded on the item as a failed attempt (retried with
 * backoff, failed for good after ACTION_MAX_ATTEMPTS); if even that cannot be
 * written, the item's lease runs out and it is taken again.
 */
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ActionRunner } from './action-runner.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { EventWriter } from '../intake/event-writer.js';
import { EventProcessor, type PreparedEvent } from './event-processor.js';
import { WorkQueue, type ClaimedActionRun, type ClaimedEvent } from './work-queue.js';

const POLL_MS = 250;
const EVENT_BATCH = 32;
const EVENT_CONCURRENCY = 8;
const ACTION_BATCH = 32;

class Wakeable {
  private wake: (() => void) | undefined;
  private pending = false;

  nudge(): void {
    this.pending = true;
    this.wake?.();
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}

@Injectable()
export class Workers implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('workers');
  private readonly events = new Wakeable();
  private readonly actions = new Wakeable();
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly queue: WorkQueue,
    private readonly processor: EventProcessor,
    private readonly runner: ActionRunner,
    writer: EventWriter,
  ) {
    writer.onCommitted(() => this.events.nudge());
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.queue.releaseStaleLeases();
    this.running = true;
    this.loops = [this.eventLoop(), this.actionLoop()];
  }

  async onApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  nudgeEvents(): void {
    this.events.nudge();
  }

  nudgeActions(): void {
    this.actions.nudge();
  }

  /** Stops claiming, waits for work in hand to finish, and hands back what was not started. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.events.nudge();
    this.actions.nudge();
    await Promise.allSettled(this.loops);
    await Promise.allSettled([...this.inFlight]);
    await this.queue.releaseMine().catch(() => undefined);
  }

  private async eventLoop(): Promise<void> {
    while (this.running) {
      const claims = await this.guard('claim events', () => this.queue.claimEvents(EVENT_BATCH));
      if (!claims || claims.length === 0) {
        await this.events.sleep(POLL_MS);
        continue;
      }
      await this.track(this.processBatch(claims));
    }
  }

  /** Evaluates a claimed batch concurrently, then commits it in one transaction. */
  private async processBatch(claims: ClaimedEvent[]): Promise<void> {
    const prepared: PreparedEvent[] = [];
    const known = await this.guard('read resources of the batch', () => this.processor.knownResources(claims));
    await mapLimit(claims, EVENT_CONCURRENCY, async (claim) => {
      const ready = await this.guard(`event ${claim.event_id}`, () => this.processor.prepare(claim, known), (error) =>
        this.processor.recordCrash(claim, this.queue.owner, error),
      );
      if (ready) prepared.push(ready);
    });
    const created = await this.guard('commit evaluated events', () => this.processor.commitAll(prepared, this.queue.owner));
    if (created === undefined) {
      // The batch could not be committed as a whole: commit each on its own, so one bad event cannot hold back the others.
      for (const one of prepared) await this.processEvent(one.claim);
      return;
    }
    if (created) this.actions.nudge();
  }

  private async processEvent(claim: ClaimedEvent): Promise<void> {
    const what = `event ${claim.event_id}`;
    const created = await this.guard(what, () => this.processor.process(claim, this.queue.owner), (error) =>
      this.processor.recordCrash(claim, this.queue.owner, error),
    );
    if (created) this.actions.nudge();
  }

  private async actionLoop(): Promise<void> {
    const slots = new Set<Promise<void>>();
    const maxInFlight = Math.max(4, Math.min(64, Math.ceil(this.config.rateLimitPerMinute / 60)));
    while (this.running) {
      const free = maxInFlight - slots.size;
      const claims = free > 0 ? await this.guard('claim action runs', () => this.queue.claimActionRuns(Math.min(free, ACTION_BATCH), this.runner.leaseMs)) : [];
      for (const claim of claims ?? []) {
        const slot = this.track(this.performAction(claim)).finally(() => {
          slots.delete(slot);
          this.actions.nudge();
        });
        slots.add(slot);
      }
      if (!claims || claims.length === 0) await this.actions.sleep(POLL_MS);
    }
    await Promise.allSettled([...slots]);
  }

  private async performAction(claim: ClaimedActionRun): Promise<void> {
    const status = await this.guard(`action run ${claim.id}`, () => this.runner.perform(claim, this.queue.owner), (error) =>
      this.runner.recordCrash(claim, this.queue.owner, error),
    );
    // A run that ended may unblock the next event about the same resource.
    if (status && status !== 'running' && status !== 'retrying') this.events.nudge();
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    return work.finally(() => this.inFlight.delete(work));
  }

  private async guard<T>(what: string, work: () => Promise<T>, record?: (error: Error) => Promise<void>): Promise<T | undefined> {
    try {
      return await work();
    } catch (error) {
      this.logger.error(`${what} failed: ${(error as Error).message}`, (error as Error).stack);
      // If even recording fails (the database is down), the lease runs out and the work is taken again.
      await record?.(error as Error).catch(() => undefined);
      return undefined;
    }
  }
}

async function mapLimit<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]);
  });
  await Promise.all(lanes);
}
