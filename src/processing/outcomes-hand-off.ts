/**
 * What the commits that record action outcomes hand to this process's event
 * loop (execution-progress.ts UnblockedEventsHandOff, wired by workers.ts):
 * the events those outcomes let go. The events held behind the creates a
 * commit may have ended go on first (parked-events.ts); on SQLite, while the
 * loop waits for work, the commit also claims whatever else is waiting, and
 * decides what it can of them itself (EventProcessor.decideLetGo), and says
 * so (`claimed`: the loop, waiting for such a commit while runs are in
 * flight, then makes no claim transaction of its own); on
 * PostgreSQL its last statement decides those of them intake evaluated
 * (let-go-statement.ts). The loop gets the rest. On PostgreSQL, where the
 * commit claims nothing, the loop is woken to claim only when the commit's
 * last statement finds an event about its runs' resources waiting for a
 * claim (WorkQueue.waitingAbout); anything else waiting (another replica's,
 * a retry's) its poll finds.
 */
import { nowIso, type Clock } from '../clock.js';
import type { DatabaseKind } from '../database/data-source.js';
import type { Statements } from '../database/statements.js';
import type { HandedOver } from '../intake/event-writer.js';
import type { EventProcessor } from './event-processor.js';
import type { UnblockedEventsHandOff } from './execution-progress.js';
import type { LeasesBeingTaken } from './leases-being-taken.js';
import type { LetGoSent } from './let-go-statement.js';
import type { ParkedEvents } from './parked-events.js';
import { allHoldTheirResource } from './work-ends.js';
import type { WorkQueue } from './work-queue.js';
import type { ClaimedActionRun, ClaimedEvent, CreatedRun, HandOff } from './work.js';

/** What the hand-off needs of the workers (workers.ts), which own the loops. */
export interface LetGoWorkers {
  running(): boolean;
  /** The event loop sleeps, waiting for work. */
  eventLoopIdle(): boolean;
  readonly parked: ParkedEvents;
  /** Events handed over for the event loop, oldest first. */
  readonly handed: ClaimedEvent[];
  readonly leasing: LeasesBeingTaken;
  /** Action runs whose outcome's commit claimed, with room to spare, the events it let go. */
  readonly claimedAfter: Set<string>;
  /** How a commit may lease the runs it creates to this process. */
  handOff(): HandOff;
  startCreated(made: CreatedRun[]): void;
  countEvents(n: number): void;
  /** Events were handed over: the loop's pause after an empty claim ends. */
  handedArrived(): void;
  nudgeEvents(): void;
  /** SQLite: a commit claimed for the event loop while it waited (told by `take`, once the commit is done). */
  claimed(): void;
}

export class OutcomesHandOff implements UnblockedEventsHandOff<ClaimedEvent> {
  /** What the outcomes' commit under way decided of the events it let go (SQLite; one commit at a time). */
  private letGo: { decided: ClaimedEvent[]; made: CreatedRun[] } | undefined;
  /** PostgreSQL: the events let go that the outcomes' commit under way sent to its last statement. */
  private letGoSent: LetGoSent | undefined;
  /** PostgreSQL: whether an event about a resource of the runs the commit under way ended waits for a claim. */
  private waiting: Promise<boolean> | undefined;
  /** SQLite: the commit under way claimed for the event loop. */
  private claiming = false;

  constructor(
    private readonly kind: DatabaseKind,
    private readonly clock: Clock,
    private readonly queue: WorkQueue,
    private readonly processor: EventProcessor,
    private readonly workers: LetGoWorkers,
    private readonly claimSize: number,
  ) {}

  async lease(sql: Statements, ended: ClaimedActionRun[]): Promise<HandedOver<ClaimedEvent>> {
    this.letGo = undefined;
    this.letGoSent = undefined;
    this.waiting = undefined;
    this.claiming = false;
    const workers = this.workers;
    // Only while the loop waits (for work, or with runs in flight for this claim: workers.ts claimedByOutcomes): a busy loop claims whole batches
    // itself, and claims in every outcome commit beside it slowed the drain of a backlog of 200,000 events from
    // 0.95-1.01x of an empty queue's to 0.68-0.82x.
    // SQLite only: PostgreSQL records outcomes in many small commits, and a claim in each (planned and run by the
    // server) tripled its transactions per event and cost a third of its events per CPU-second; there the loop
    // claims after the runs end, as before.
    if (!workers.running()) return { events: [], complete: false };
    // The events held behind creates this commit may have ended go on first; they need no claim.
    const free = workers.parked.size > 0 ? await this.queue.goneOn(sql, workers.parked.all) : [];
    if (this.kind === 'postgres') {
      const { events } = await this.sendLetGo(sql, free);
      // The loop claims after this commit only where its runs may have let an event about their resources go (the
      // rest it was handed, or is told of by `take`); without this it claimed after every commit and mostly found
      // nothing, about 1,600 claims a minute on the benchmark's load against some 600 that found as little before.
      const keys = ended.map((run) => run.resource_key).filter((key): key is string => key !== null);
      this.waiting = this.queue.waitingAbout(sql, [...new Set(keys)]);
      this.waiting.catch(() => undefined); // the commit fails with it
      return { events, complete: true };
    }
    if (free.length > 0 || !workers.eventLoopIdle() || workers.handed.length > 0) return this.decideLetGo(sql, { events: free, complete: false });
    this.claiming = true;
    const events = await this.queue.claimEventsIn(sql, this.claimSize);
    return this.decideLetGo(sql, { events, complete: events.length < this.claimSize });
  }

  take(taken: ClaimedEvent[], complete: boolean, runs: string[]): void {
    const workers = this.workers;
    // SQLite: what it decided of them (decideLetGo) is not parked any longer, and their first runs start; once
    // stopping, the runs it leased are left to the next start (releaseStaleLeases): stop waits for no new ones.
    const { decided, made } = this.letGo ?? { decided: [], made: [] };
    workers.leasing.commitEnds('outcomes');
    workers.parked.unpark(decided);
    if (decided.length > 0) workers.countEvents(decided.length);
    if (workers.running()) workers.startCreated(made);
    // A parked event the loop handed on meanwhile itself (after a commit of its own) is not handed on again.
    this.handOn(workers.parked.unpark(taken));
    if (complete) for (const run of runs) workers.claimedAfter.add(run);
    if (this.claiming) workers.claimed();
    this.claiming = false;
    // A decided event that left no run on its resource lets the next one about it go: a claim may find it.
    if (!complete || !allHoldTheirResource(decided, made)) workers.nudgeEvents();
    const waiting = this.waiting;
    this.waiting = undefined;
    // Answered before the commit was done (Statements.queueRows), as is the statement the events were sent to.
    if (waiting !== undefined) void waiting.then((any) => any && workers.nudgeEvents(), () => undefined);
    const sent = this.letGoSent;
    this.letGoSent = undefined;
    if (sent !== undefined && sent.sent.length > 0) void sent.answer.then((answered) => this.takeLetGo(sent.sent, answered), () => undefined);
  }

  private handOn(events: ClaimedEvent[]): void {
    if (events.length === 0) return;
    this.workers.handed.push(...events);
    this.workers.handedArrived();
    this.workers.nudgeEvents();
  }

  /**
   * SQLite: the events an outcomes' commit let go, decided in that commit (EventProcessor.decideLetGo), their first
   * runs leased to the action loop as far as it has room (what it decided is kept for `take`, once the commit is done);
   * what it could not decide goes to the event loop as before.
   */
  private async decideLetGo(sql: Statements, { events, complete }: HandedOver<ClaimedEvent>): Promise<HandedOver<ClaimedEvent>> {
    if (events.length === 0) return { events, complete };
    this.workers.leasing.commitStarts('outcomes');
    const { decided, rest, made } = await this.processor.decideLetGo(sql, events, nowIso(this.clock), this.workers.handOff());
    this.letGo = { decided, made };
    return { events: rest, complete };
  }

  /**
   * PostgreSQL: the events let go that an outcomes' commit may decide in its last statement (EventProcessor.sendLetGo,
   * for those intake evaluated); the others go to the event loop as before.
   */
  private async sendLetGo(sql: Statements, free: ClaimedEvent[]): Promise<HandedOver<ClaimedEvent>> {
    if (free.length === 0) return { events: free, complete: false };
    this.workers.leasing.commitStarts('outcomes');
    this.letGoSent = await this.processor.sendLetGo(sql, free, nowIso(this.clock), this.workers.handOff());
    return { events: this.letGoSent.rest, complete: false };
  }

  /** PostgreSQL: what the statement decided of the events sent to it; those it did not go to the event loop, evaluated there. */
  private takeLetGo(sent: ClaimedEvent[], { decided, made }: Awaited<LetGoSent['answer']>): void {
    const workers = this.workers;
    workers.parked.unpark(decided);
    if (decided.length > 0) workers.countEvents(decided.length);
    // Started even once stopping (the commit leased them to this process, and PostgreSQL has no start-up release of
    // stale leases as SQLite has): stop waits for them as for any work in flight.
    workers.startCreated(made);
    const undecided = new Set(sent);
    for (const event of decided) undecided.delete(event);
    const events = workers.parked.unpark([...undecided]);
    for (const event of events) delete event.heldEvaluation;
    this.handOn(events);
    if (!allHoldTheirResource(decided, made)) workers.nudgeEvents();
  }
}
