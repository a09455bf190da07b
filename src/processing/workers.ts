/**
 * The two loops that move work along: one claims received events and evaluates
 * them, the other claims due action runs and performs them. Each sleeps when
 * there is nothing to do and is woken at once by whoever makes new work (intake
 * after a commit, the event loop after creating action runs, an action run that
 * finishes and so unblocks the next event on its resource); a short poll covers
 * work that becomes due by time (retries) or is created by another replica.
 * Intake's commits lease the new events they store to the event loop, and on
 * SQLite, while the loop waits, the commits that record action outcomes claim
 * the events those let go: the loop's own claim is then for what they had no
 * room for, retries, recovery and the work of other replicas. (Intake leases
 * new resources held behind creates in flight too, and the outcome commits
 * that end those creates let them go: parked-events.ts.) On SQLite an outcome
 * commit also decides the events it lets go, as intake's commit decides new
 * ones (EventProcessor.decideLetGo): the loop gets only what it could not. So
 * does the loop's own claim there, in its transaction (event-claims.ts); but
 * while runs are in flight the loop first waits, briefly, for the next outcome
 * commit to claim for it (claimedByOutcomes), which saves the claim a COMMIT.
 *
 * This is the one catch boundary of processing (catch-boundary.ts): any throw
 * while handling one item is logged and recorded on the item as a failed
 * attempt (retried with backoff, failed for good after ACTION_MAX_ATTEMPTS);
 * if even that cannot be written, the item's lease runs out and it is taken
 * again.
 *
 * A storage fault (the database refuses writes: full disk, read-only, I/O
 * error, PostgreSQL unreachable) is not the item's fault: it is neither logged
 * per item (the database logs the fault once when it starts and once when it
 * ends) nor recorded as an attempt. The loops pause instead, longer each time up
 * to STORAGE_PAUSES_MS's last step, and once writes go through again the event
 * loop hands back the leases this process holds on work it is not doing (events
 * it could not complete, action runs whose outcome it could not record), so
 * that work resumes at once rather than when the leases run out. That includes
 * work the fault took back: a failed disk may lose the bookkeeping written
 * since its last sync, and events and runs this process had finished are then
 * waiting again under its leases.
 */
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ActionRunner } from './action-runner.js';
import { CLOCK, isoString, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { EventWriter } from '../intake/event-writer.js';
import { EventProcessor } from './event-processor.js';
import { ExecutionProgress } from './execution-progress.js';
import { CLAIM_MIN, handedBatchSize } from './claim-size.js';
import { EventClaims, type ClaimDecided } from './event-claims.js';
import { Replicas } from './replicas.js';
import { RunsAhead } from './runs-ahead.js';
import { Backoff, Wakeable, yieldToIo } from './wakeable.js';
import { WorkQueue } from './work-queue.js';
import type { ClaimedActionRun, ClaimedEvent, CreatedRun, HandOff, LoadedExecution, PreparedEvent } from './work.js';
import { statementsOf } from '../database/statements.js';
import { ParkedEvents } from './parked-events.js';
import { OutcomesHandOff } from './outcomes-hand-off.js';
import { LeasesBeingTaken } from './leases-being-taken.js';
import { mapLimit } from './map-limit.js';
import { guarded } from './catch-boundary.js';
import { allHoldTheirResource, endsItsExecution } from './work-ends.js';

const POLL_MS = 250;
/** The first claim's size; events handed over are taken handedBatchSize's at a time. */
const EVENT_BATCH = CLAIM_MIN;
/**
 * The claims made in outcome commits (SQLite, while the event loop waits: claimedByOutcomes). At 64 instead of 32,
 * side by side with 32 (session 86): a backlog of 200,000 drained at 2,852-3,679 actions/s against 2,681-3,143 (four
 * runs each, in turns), and in open loops at 1,450 and 1,750 webhooks a second each 0.985x and 0.991x the main
 * thread's CPU an event, for as many events.
 */
const OUTCOMES_CLAIM = 64;
const EVENT_CONCURRENCY = 8;
const ACTION_BATCH = 32;
/** At most this many events handed over by intake's commits wait in memory (leased to this process) for the event loop. */
const HANDED_MAX = 256;
/**
 * Action runs performed at once: one second's worth of the rate budget, at least 4 and at most this many (the
 * transport keeps as many sockets, service-transport.ts). A run holds its slot until its outcome is committed. At 64,
 * on PostgreSQL, the slots were all held by runs whose outcome commits were still to come, so most new runs could not
 * be handed to the action loop in the commit that created them: they were stored pending and came back through the
 * action claim (70% of them end to end), each claimed run one more UPDATE. At 256, in two alternating pairs: 0.18
 * transactions and 34–36 rows read per event instead of 0.23–0.24 and 48–51, e2e p50 82–89 ms instead of 227–407.
 */
const MAX_IN_FLIGHT = 256;
/** While the event loop is ahead of the actions (runs-ahead.ts), it looks again this often. */
const RUNS_AHEAD_PAUSE_MS = 20;
/**
 * SQLite, with action runs in flight: how long the event loop waits for an outcomes' commit to claim for it (in that
 * commit, deciding what it claims there) before it claims in a transaction of its own.
 */
const OUTCOMES_CLAIM_WAIT_MS = 5;

@Injectable()
export class Workers implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('workers');
  private readonly events = new Wakeable();
  private readonly actions = new Wakeable();
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Action runs being performed now. */
  private readonly slots = new Set<Promise<unknown>>();
  private readonly maxInFlight: number;
  /** Set when a storage fault cut work short while this process held leases; cleared once they are handed back. */
  private leasesToHandBack = false;
  /** The storage faults seen (StorageHealth.faultsStarted) when leases were last handed back. */
  private faultsHandedBack = 0;
  /** Ids of the action runs being performed now: their leases are not handed back. */
  private readonly performing = new Set<string>();
  /** The claims and commits leasing action runs to this process, until their runs are in `performing`. */
  private readonly leasing: LeasesBeingTaken;
  /** The action loop's last claim took all it asked for (or asked for none): more may wait for a free slot. */
  private actionClaimFull = true;
  /** How far the event loop is ahead of the action loop (runs-ahead.ts). */
  private readonly runsAhead = new RunsAhead();
  /** Events that intake's commits leased to this process, oldest first (event-writer.ts). */
  private readonly handed: ClaimedEvent[] = [];
  /** Events intake leased held behind creates in flight, until those end. */
  private readonly parked = new ParkedEvents(POLL_MS);
  /** Ends the pause after an empty claim early when intake hands events over. */
  private readonly handedArrival = new Wakeable();
  /**
   * Action runs whose outcome's commit claimed, with room to spare, the events it let go: when they end, nothing is
   * left for the event loop to claim on their account (execution-progress.ts).
   */
  private readonly claimedAfter = new Set<string>();
  /** The event loop sleeps, waiting for work. */
  private eventLoopIdle = false;
  /** How many claims the outcomes' commits made for the event loop (SQLite: OutcomesHandOff). */
  private outcomeClaims = 0;
  private readonly claims: EventClaims;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly queue: WorkQueue,
    private readonly processor: EventProcessor,
    private readonly runner: ActionRunner,
    private readonly db: Database,
    private readonly writer: EventWriter,
    private readonly replicas: Replicas,
    progress: ExecutionProgress,
  ) {
    this.leasing = new LeasesBeingTaken(clock);
    this.claims = new EventClaims(db, clock, queue, processor);
    this.takeFromIntake(writer);
    this.takeFromOutcomes(progress);
    this.maxInFlight = Math.max(4, Math.min(MAX_IN_FLIGHT, Math.ceil(config.rateLimitPerMinute / 60)));
  }

  /** What intake's commits hand over: the events they lease, and those they decide with their first runs. */
  private takeFromIntake(writer: EventWriter): void {
    writer.handOffTo<CreatedRun>({
      lease: () => (this.running ? this.queue.freshLease(HANDED_MAX - this.handed.length - this.parked.size) : undefined),
      // An event that only needs its evaluation is decided in the commit that stores it (no lookups there), with the
      // executions of the rules that matched it and their first runs, handed to the action loop (on PostgreSQL, whose
      // statement reads nothing first, not where a rule throttles or debounces, nor where events of the same scope are
      // parked behind creates in flight: those go with their evaluation).
      decider: (sql, events, now) => this.processor.deciderAtIntake(sql, events, now, this.intakeHandOff(), (scope) => this.parked.holds(scope)),
      // New events not leased for want of room go to a claim; the others not leased wait for whatever holds them
      // (an earlier event about their resource, a create in flight), whose commit lets them go.
      take: (leased, complete, decided, made) => {
        this.leasing.commitEnds('intake');
        // Those stored decided are counted as the event loop counts what it commits.
        if (decided.length > 0) this.replicas.countEvents(this.processor.countDecided(decided));
        if (made.length > 0) this.startCreated(made);
        const ready = this.parked.park(leased.map((event) => this.processor.evaluatedAt(event)));
        this.handed.push(...ready);
        if (ready.length > 0) this.handedArrival.nudge();
        if (ready.length > 0 || !complete) this.events.nudge();
      },
    });
  }

  /** What the commits of outcomes hand over: the events those let go (outcomes-hand-off.ts). */
  private takeFromOutcomes(progress: ExecutionProgress): void {
    progress.handOffTo<ClaimedEvent>(
      new OutcomesHandOff(this.db.kind, this.clock, this.queue, this.processor, {
        running: () => this.running,
        eventLoopIdle: () => this.eventLoopIdle,
        parked: this.parked,
        handed: this.handed,
        leasing: this.leasing,
        claimedAfter: this.claimedAfter,
        handOff: () => this.handOff(),
        startCreated: (made) => this.startCreated(made),
        countEvents: (n) => this.replicas.countEvents(n),
        handedArrived: () => this.handedArrival.nudge(),
        nudgeEvents: () => this.events.nudge(),
        claimed: () => {
          this.outcomeClaims++;
          this.handedArrival.nudge();
        },
      }, OUTCOMES_CLAIM),
    );
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
    // A commit of intake's in flight may lease runs to this process (the events it decides): they start, and are
    // waited for below, as the event loop's are. Intake takes no new webhooks by now (stopApp), and once the loops
    // stop its commits lease nothing.
    await this.writer.settled();
    this.running = false;
    this.events.nudge();
    this.actions.nudge();
    await Promise.allSettled(this.loops);
    // Work in flight may start more as it ends (the first runs of the events an outcome commit decided on PostgreSQL).
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.queue.releaseMine().catch(() => undefined);
  }

  private async eventLoop(): Promise<void> {
    const pause = new Backoff();
    while (this.running) {
      const batch = (await this.handBackLeases()) ? await this.nextBatch() : undefined;
      const more = batch !== undefined && (await this.track(this.processClaimed(batch)));
      if (this.storageFailing) await this.events.sleep(pause.next());
      else {
        pause.reset();
        if (!more) await this.idle(() => this.events.sleep(POLL_MS));
        else await yieldToIo();
      }
    }
  }

  private async idle(sleep: () => Promise<void>): Promise<void> {
    this.eventLoopIdle = true;
    try {
      await sleep();
    } finally {
      this.eventLoopIdle = false;
    }
  }

  /**
   * Events handed over by the commits of intake and of outcomes first; else a
   * claim (`full`: it took all it asked for), unless a probe of the waiting events says it would find
   * nothing (the usual case once those commits hand their events over: a
   * wake-up then costs one index probe).
   */
  private async nextBatch(): Promise<Omit<ClaimDecided, 'taken'> | undefined> {
    if (this.handed.length === 0) await this.lookAtParked();
    const pause = this.claims.pauseMs();
    if (this.handed.length === 0 && pause > 0) await this.idle(() => this.handedArrival.sleep(pause));
    // Ahead of the actions, the loop claims nothing and looks again shortly; events handed over are taken at once.
    while (this.running && this.handed.length === 0 && this.runsAhead.ahead(this.slots.size, this.maxInFlight)) await this.handedArrival.sleep(RUNS_AHEAD_PAUSE_MS);
    if (this.handed.length > 0) return { rest: this.handed.splice(0, handedBatchSize(this.db.kind)), full: false, decided: [], made: [] };
    if (!this.running) return undefined;
    const maybe = await this.guard('look for claimable events', () => this.queue.anyClaimable());
    if (maybe === false) return undefined;
    // With runs in flight, the next outcome commit may claim for the loop; what it could not decide is handed over.
    if (await this.claimedByOutcomes()) return this.handed.length > 0 ? { rest: this.handed.splice(0, handedBatchSize(this.db.kind)), full: false, decided: [], made: [] } : undefined;
    // The runs of the events the claim decides (SQLite) are leased as the loop's commit leases them (processBatch).
    return this.leasing.during(async () => {
      const claimed = await this.guard('claim events', () => this.claims.claim(this.handOff()));
      if (claimed && claimed.decided.length > 0) this.replicas.countEvents(claimed.decided.length);
      this.startCreated(claimed?.made ?? []);
      return claimed;
    });
  }

  /**
   * SQLite, with runs in flight (so outcomes' commits to come): the loop waits, idle, for the next of them to claim
   * what waits and decide it in its own transaction (OutcomesHandOff.lease), rather than claiming in a transaction of
   * its own, a COMMIT more for some 27 events. True when one did (what it could not decide is handed over).
   */
  private async claimedByOutcomes(): Promise<boolean> {
    if (this.db.kind !== 'sqlite' || this.slots.size === 0) return false;
    const before = this.outcomeClaims;
    await this.idle(() => this.handedArrival.sleep(OUTCOMES_CLAIM_WAIT_MS));
    return this.outcomeClaims !== before || this.handed.length > 0;
  }

  /** The loop's own look at the parked events, for creates that end with no outcome recorded (ParkedEvents). */
  private async lookAtParked(): Promise<void> {
    if (!this.parked.dueForALook()) return;
    const free = await this.guard('look at held events', () => this.db.write((manager) => this.queue.goneOn(statementsOf(manager), this.parked.all)));
    this.handed.push(...this.parked.unpark(free ?? []));
  }

  private get storageFailing(): boolean {
    return this.db.health.current !== undefined;
  }

  /**
   * After a storage fault (seen by these loops or by any other write), once
   * writes go through: gives back the leases of events whose evaluation it cut
   * short, and of action runs not being performed now (no batch is in hand
   * here: the loop is between batches). False while that is not possible yet.
   */
  private async handBackLeases(): Promise<boolean> {
    const faults = this.db.health.faultsStarted;
    if (!this.leasesToHandBack && faults === this.faultsHandedBack) return true;
    // Their leases are given back with the rest: a claim takes them again.
    this.handed.splice(0);
    this.parked.clear();
    const runs = await this.guard('hand back leases', async () => {
      await this.queue.releaseMine();
      // Leases run out at `leaseMs` after they were taken: those that run out earlier were taken before any claim or commit in flight.
      const takenBefore = this.leasing.takenBefore();
      return this.queue.releaseMyRuns(this.performing, isoString(takenBefore + this.runner.leaseMs));
    });
    if (runs === undefined) return false;
    this.leasesToHandBack = false;
    this.faultsHandedBack = faults;
    if (runs > 0) this.actions.nudge();
    return true;
  }

  /** Evaluates and commits what the claim did not decide; true when events may be claimable at once (processBatch). */
  private async processClaimed({ rest, full, decided, made }: Omit<ClaimDecided, 'taken'>): Promise<boolean> {
    const more = rest.length > 0 && (await this.processBatch(rest, full));
    return more || (decided.length > 0 && (full || this.handed.length > 0 || !allHoldTheirResource(decided, made)));
  }

  /**
   * Evaluates a claimed batch concurrently, then commits it in one transaction.
   * True when events may be claimable at once (claim again without waiting for a nudge): a claim that took all it
   * asked for may have left more (a batch handed over says so itself when its commit's claim was full), an event
   * that could not be committed is tried again, and one that left no run on its resource lets the next one go.
   */
  private async processBatch(claims: ClaimedEvent[], full: boolean): Promise<boolean> {
    const prepared: PreparedEvent[] = [];
    const known = await this.guard('read resources of the batch', () => this.processor.knownResources(claims.filter((claim) => !claim.evaluated)));
    // A claim's worth at a time, with a turn of the event loop between: PostgreSQL's batches of up to 256 (claim-size.ts)
    // evaluated at once held back every webhook and every answer from the server meanwhile.
    await mapLimit(claims, EVENT_CONCURRENCY, async (claim) => {
      const ready = await this.guard(`event ${claim.event_id}`, () => this.processor.prepare(claim, known), (error) =>
        this.processor.recordCrash(claim, this.queue.owner, error),
      );
      if (ready) prepared.push(ready);
    }, EVENT_BATCH);
    // The first action runs go to this process's action loop in the same commit, as far as it has room.
    const created = await this.leasing.during(async () => {
      const made = await this.guard('commit evaluated events', () => this.processor.commitAll(prepared, this.queue.owner, this.handOff()));
      this.startCreated(made ?? []);
      return made;
    });
    // Committing each event on its own cannot help when the database takes no writes at all.
    if (created === undefined && this.leasesToHandBack) return true;
    if (created === undefined) {
      // The batch could not be committed as a whole: commit each on its own, so one bad event cannot hold back the others.
      for (const one of prepared) await this.processEvent(one.claim);
      return true;
    }
    this.replicas.countEvents(prepared.length);
    return full || this.handed.length > 0 || prepared.length < claims.length || !allHoldTheirResource(prepared.map((p) => p.claim), created);
  }

  private async processEvent(claim: ClaimedEvent): Promise<void> {
    const what = `event ${claim.event_id}`;
    const created = await this.guard(what, () => this.processor.process(claim, this.queue.owner), (error) =>
      this.processor.recordCrash(claim, this.queue.owner, error),
    );
    if (created) this.replicas.countEvents(1);
    if (created && created.length > 0) this.actions.nudge();
  }

  private async actionLoop(): Promise<void> {
    const pause = new Backoff();
    while (this.running) {
      // No more than the rate budget can start now: a run it cannot start would only be handed back (budget-wait.ts).
      const room = this.runner.room(Math.min(this.maxInFlight - this.slots.size, ACTION_BATCH));
      const claims = await this.leasing.during(async () => {
        const claimed = room.free > 0 ? await this.guard('claim action runs', () => this.queue.claimActionRuns(room.free, this.runner.leaseMs)) : [];
        const taken = claimed ?? [];
        const executions = await this.guard('read the executions of claimed runs', () => this.runner.executionsOf(taken));
        for (const claim of taken) this.startAction(claim, executions?.get(claim.execution_id));
        return claimed;
      });
      this.actionClaimFull = claims === undefined || claims.length >= room.free;
      this.runsAhead.claimed(claims && { asked: room.free, took: claims.length });
      if (this.storageFailing) await this.actions.sleep(pause.next());
      else {
        pause.reset();
        if (!claims || claims.length === 0) await this.actions.sleep(Math.max(POLL_MS, room.waitMs));
        else await yieldToIo();
      }
    }
    await Promise.allSettled([...this.slots]);
  }

  /** Performs a run in a slot of its own; `execution` when the commit that created it handed it over. */
  private startAction(claim: ClaimedActionRun, execution?: LoadedExecution): void {
    let status: string | undefined;
    const slot = this.track(this.performAction(claim, execution))
      .then((ended) => (status = ended))
      .finally(() => {
        this.slots.delete(slot);
        // A claim would find nothing new: no run was queued behind a full claim, and this one made none (it ended its execution).
        if (this.actionClaimFull || !endsItsExecution(claim, execution, status)) this.actions.nudge();
      });
    this.slots.add(slot);
  }

  private async performAction(claim: ClaimedActionRun, execution?: LoadedExecution): Promise<string | undefined> {
    this.performing.add(claim.id);
    const status = await this.guard(`action run ${claim.id}`, () => this.runner.perform(claim, this.queue.owner, execution), (error) =>
      this.runner.recordCrash(claim, this.queue.owner, error),
    ).finally(() => this.performing.delete(claim.id));
    // A run that ended may unblock the next event about the same resource, unless its outcome's commit claimed them.
    const claimed = this.claimedAfter.delete(claim.id);
    if (status && status !== 'running' && status !== 'retrying' && status !== 'pending') {
      this.replicas.countActionRuns(1);
      if (!claimed) this.events.nudge();
    }
    return status;
  }

  /** The runs a commit created: those leased to this process start now; the action loop claims the others. */
  private startCreated(created: CreatedRun[]): void {
    const unleased = created.filter(({ leased }) => !leased).length;
    for (const { run, execution, leased } of created) if (leased) this.startAction(run, execution);
    this.runsAhead.created(unleased);
    if (unleased > 0) this.actions.nudge();
  }

  /**
   * How intake's next commit may lease the first runs of the events it decides to this process (as the event loop's
   * commits do): as far as the action loop has room, while the loops run. Its leases count as being taken until the
   * commit is done (`take`), or until the next commit asks, if this one failed.
   */
  private intakeHandOff(): HandOff | undefined {
    if (!this.running) return undefined;
    this.leasing.commitStarts('intake');
    return this.handOff();
  }

  /** How a commit may lease the runs it creates to this process: as far as the action loop has room now. */
  private handOff(): HandOff {
    return this.queue.handOff(this.runner.leaseMs, this.runner.room(this.maxInFlight - this.slots.size).free);
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    return work.finally(() => this.inFlight.delete(work));
  }

  /** The catch boundary (catch-boundary.ts): after a storage fault, the leases of work cut short are handed back. */
  private guard<T>(what: string, work: () => Promise<T>, record?: (error: Error) => Promise<void>): Promise<T | undefined> {
    return guarded(this.logger, () => (this.leasesToHandBack = true), what, work, record);
  }
}
