/**
 * Evaluates one claimed event against the rules that listen to it and commits,
 * in one transaction guarded by the lease: the event's outcome and explanation,
 * an execution per matched rule with its first action run (or `throttled`), and
 * the resource snapshot the next event's `changes` will be computed from.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import { backoffDelayMs } from '../actions/retry-policy.js';
import { ServiceClient } from '../actions/service-client.js';
import { ServiceLookups } from '../actions/service-lookups.js';
import type { CausalScope } from '../causal-scope.js';
import { CLOCK, isoIn, isoOf, nowIso, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { statementsOf, type Statements } from '../database/statements.js';
import { storageFaultOf } from '../database/storage-faults.js';
import { type EventEnvelope } from '../intake/envelope.js';
import type { DecidedEvent, Decider, FreshEvent } from '../intake/event-writer.js';
import { isObject, safeJsonParse } from '../json.js';
import { Metrics } from '../observability/metrics.js';
import { computeChanges, EventFacts, type Changes, type Lookups } from '../rules/facts.js';
import { factsUsedBy } from '../rules/facts-used.js';
import { evaluateEvent } from '../rules/rule-evaluator.js';
import { explanationOf, readsFacts, resourceOf } from './verdict-parts.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';
import type { LoadedRule } from '../rules/rule.types.js';
import { EventCommit, resourceSnapshotText } from './event-commit.js';
import { IntakeStatement } from './made-at-intake.js';
import { sendLetGo, type LetGoSent } from './let-go-statement.js';
import { readKnownResources, type KnownResources } from './known-resources.js';
import { NoLookups } from './no-lookups.js';
import { chainPosition, isLoopBlocked, type ChainPosition } from './loop-guard.js';
import { debounceKey, throttleKey } from './throttle.js';
import type { ClaimedEvent, CreatedRun, EvaluatedAtIntake, HandOff, HeldEvaluation, PreparedEvent, RuleExplanation, Verdict, VerdictMatch } from './work.js';

/** What a commit of outcomes decided of the events it let go (EventProcessor.decideLetGo), and what it left to the event loop. */
export interface LetGoDecided {
  decided: ClaimedEvent[];
  rest: ClaimedEvent[];
  /** The first runs of the decided events' executions. */
  made: CreatedRun[];
}

@Injectable()
export class EventProcessor {
  private readonly logger = new Logger('processing');
  private readonly committer: EventCommit;
  /** What intake's last commit evaluated of the events it handed over (deciderAtIntake), by event id. */
  private readonly evaluatedAtIntake = new Map<string, EvaluatedAtIntake>();
  /** The events intake's last commit decided `processed` (a rule matched them), by id: the others it decided are `ignored`. */
  private readonly processedAtIntake = new Set<string>();
  /** PostgreSQL: what intake's last commit evaluated of the events it likely leased held (ClaimedEvent.heldEvaluation), by id. */
  private readonly heldAtIntake = new Map<string, HeldEvaluation>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: Database,
    private readonly registry: RuleRegistry,
    private readonly client: ServiceClient,
    private readonly metrics: Metrics,
  ) {
    this.committer = new EventCommit(db.kind, config.dryRun, metrics);
  }

  /** The snapshots and provenance of the resources a batch is about, read for the whole batch (known-resources.ts). */
  async knownResources(claims: Array<Pick<ClaimedEvent, 'resource_key' | 'held'>>, sql = statementsOf(this.db.manager)): Promise<KnownResources> {
    return readKnownResources(this.db.kind, sql, claims);
  }

  /** Evaluates and commits one event; returns the action runs it created (leased to `handOff` when given). */
  async process(claim: ClaimedEvent, leaseOwner: string, handOff?: HandOff): Promise<CreatedRun[]> {
    return this.commitAll([await this.prepare(claim)], leaseOwner, handOff);
  }

  /**
   * Commits the outcomes of several evaluated events in one transaction (a
   * claimed batch pays for one commit, not one each); an event whose lease was
   * lost is left out. Returns the action runs created (leased to `handOff` when given).
   */
  async commitAll(prepared: PreparedEvent[], leaseOwner: string, handOff?: HandOff): Promise<CreatedRun[]> {
    if (prepared.length === 0) return [];
    for (const { claim, verdict } of prepared) {
      if (verdict.status === 'received') this.logger.warn({ msg: 'event evaluation postponed', event: claim.event_id, error: verdict.error, retryAt: verdict.retryAt });
    }
    return this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      const now = nowIso(this.clock);
      return this.committer.commitAll(sql, prepared, leaseOwner, now, handOff);
    });
  }

  /** Everything about an event that needs no writing: lookups, loop check, rule evaluation (done already when intake's commit did it). */
  async prepare(claim: ClaimedEvent, known?: KnownResources): Promise<PreparedEvent> {
    if (claim.evaluated) return { claim, envelope: claim.envelope, ...claim.evaluated };
    const envelope = claim.envelope ?? (safeJsonParse(claim.payload) as EventEnvelope);
    const resource = resourceOf(envelope, claim.resource_key);
    const { snapshots, provenance: provenances } = known ?? (await this.knownResources([claim]));
    const previous = claim.resource_key ? snapshots.get(claim.resource_key) : undefined;
    const provenance = (claim.resource_key && provenances.get(claim.resource_key)) || null;
    const position = chainPosition(provenance, this.clock.now());
    let verdict: Verdict;
    if (isLoopBlocked(position, this.config.maxChainDepth)) {
      this.logger.warn({ msg: 'loop blocked', event: claim.event_id, type: claim.type, resource: claim.resource_key, depth: position.depth, rule: provenance?.ruleId });
      this.metrics.loopsBlocked.inc();
      verdict = { status: 'loop_blocked', position, explanation: [], matched: [] };
    } else {
      const before = previous ? (safeJsonParse(previous.payload) as Record<string, unknown>) : undefined;
      verdict = await this.evaluate(claim, envelope, computeChanges(resource, before, envelope.data?.changes), position);
    }
    const cancels = claim.resource_key === null ? [] : this.registry.cancellersOf(claim.type);
    const prepared: PreparedEvent = { claim, verdict, resource, envelope, resourceKnown: previous !== undefined };
    if (cancels.length > 0) prepared.cancels = cancels;
    return prepared;
  }

  /**
   * Decides new events in the commit that stores them (event-writer.ts FreshEventsHandOff.decider), when that is all
   * there is to do: each is evaluated as `prepare` would, on what the commit sees (the snapshots and provenance of the
   * batch's resources, read once, and the snapshots its earlier events saved; on PostgreSQL nothing, see below), and
   * no rule matches it. With `handOff`, an event a rule matched is decided too, with its executions and first runs
   * (`matchedAtIntake`; on PostgreSQL made before the statement that stores the batch and written by it:
   * made-at-intake.ts). Not decided (undefined; the event loop commits it): a rule matched, without `handOff`, or on
   * PostgreSQL where IntakeStatement.matched declines (its evaluation goes to the loop with the event, `evaluatedAt`,
   * unless the commit finds it `stale`); and, evaluated by the loop as any other event: a condition asked for a lookup (a call to
   * the service has no place inside a commit); the event's type cancels waiting executions; its chain is blocked as a
   * loop (the loop logs it and stores an engine event); or anything threw.
   */
  async deciderAtIntake(sql: Statements, events: FreshEvent[], now: string, handOff?: HandOff, holds?: (scope: CausalScope) => boolean): Promise<Decider<CreatedRun> | undefined> {
    this.evaluatedAtIntake.clear();
    this.processedAtIntake.clear();
    this.heldAtIntake.clear();
    try {
      // PostgreSQL reads nothing first (a round trip inside intake's transaction cost more than the decisions saved):
      // evaluated as if the resource had neither snapshot nor provenance, and stored decided only where the statement
      // that stores it finds that so, or that the evaluation did not read the snapshot (AssumingDecider.readSnapshot).
      const at = new Date(now);
      if (this.db.kind === 'postgres') {
        const known = { snapshots: new Map(), provenance: new Map() };
        const statement = new IntakeStatement(this.committer, holds);
        return {
          decide: (event) => this.decideAtIntake(sql, event, known, at, handOff, statement),
          readSnapshot: (resourceKey) => statement.readSnapshot.has(resourceKey),
          stale: (eventId) => {
            this.evaluatedAtIntake.delete(eventId);
            this.heldAtIntake.delete(eventId);
          },
          made: () => statement.made.written(),
          madeBy: (eventId, seq) => this.countMade(eventId, statement.made.madeBy(eventId, seq)),
        };
      }
      const known = await this.knownResources(events, sql);
      return {
        decide: (event) => this.decideAtIntake(sql, event, known, at, handOff),
        // Every resource of the batch was looked up (a fresh event is never held), and each snapshot saved since is in `known`.
        seen: (resourceKey) => known.snapshots.has(resourceKey),
      };
    } catch (error) {
      if (storageFaultOf(error)) throw error; // the commit fails with it, as it would have in its next statement
      return undefined;
    }
  }

  private async decideAtIntake(
    sql: Statements,
    event: FreshEvent,
    known: KnownResources,
    now: Date,
    handOff: HandOff | undefined,
    statement?: IntakeStatement,
  ): Promise<DecidedEvent<CreatedRun> | undefined> {
    try {
      const here = await this.evaluateHere(event, known, now);
      if (here === undefined) return undefined;
      const { envelope, resource, resourceKnown, position, explanation, matched } = here;
      const key = event.resource_key;
      if (key !== null && here.readSnapshot) statement?.readSnapshot.add(key);
      const committer = this.committer;
      if (statement?.likelyHeld(key, envelope)) this.keepIfHeld(event.event_id, { verdict: { status: matched.length > 0 ? 'processed' : 'ignored', position, explanation, matched }, resource, resourceKnown, readSnapshot: here.readSnapshot });
      if (matched.length > 0) {
        const verdict: Verdict = { status: 'processed', position, explanation, matched };
        const evaluated = { verdict, resource, resourceKnown };
        if (handOff !== undefined && statement === undefined) return this.matchedAtIntake(sql, event, envelope, evaluated, known, now, handOff);
        // PostgreSQL: in the statement that stores the batch, where it can be (IntakeStatement.matched).
        const inStatement = handOff && (await statement?.matched(sql, event, envelope, evaluated, now, handOff));
        if (inStatement) return inStatement;
        // Handed over with the event (`evaluatedAt`): the loop commits this evaluation. Of two events with one id in a
        // commit the first is the one stored; the second, a duplicate, must not put its evaluation in the first's place.
        if (!this.evaluatedAtIntake.has(event.event_id)) this.evaluatedAtIntake.set(event.event_id, evaluated);
        return undefined;
      }
      const snapshot = resourceSnapshotText(key, resource);
      return {
        status: 'ignored', depth: position.depth, selfCaused: position.selfCaused, explanation: JSON.stringify(explanation), snapshot,
        // A method, not an arrow function: the bundle names an arrow made per event at a cost (condition-results.ts `within`).
        async record(sql, seq) {
          await committer.recordDecided(sql, { seq, resourceKey: key, snapshot }, isoOf(now));
          // The next event of the commit about the resource compares itself with this one.
          if (key !== null && snapshot !== undefined) known.snapshots.set(key, { payload: snapshot });
          return [];
        },
      };
    } catch {
      return undefined; // the event loop evaluates it, and records what throws there
    }
  }

  /**
   * An event evaluated inside a commit, on what that commit sees (`known`): as `prepare` evaluates it, with no lookup.
   * Undefined where the event loop must evaluate it instead: a condition asked for a lookup (a call to the service has
   * no place inside a commit); the event's type cancels waiting executions; its chain is blocked as a loop (the loop
   * logs it and stores an engine event). Throws what the evaluation throws.
   */
  private async evaluateHere(event: Pick<FreshEvent, 'type' | 'resource_key' | 'payload' | 'envelope'>, known: KnownResources, now: Date) {
    const key = event.resource_key;
    if (key !== null && this.registry.cancellersOf(event.type).length > 0) return undefined;
    const envelope = event.envelope ?? (safeJsonParse(event.payload) as EventEnvelope);
    const resource = resourceOf(envelope, key);
    const previous = key ? known.snapshots.get(key) : undefined;
    const position = chainPosition((key && known.provenance.get(key)) || null, now);
    if (isLoopBlocked(position, this.config.maxChainDepth)) return undefined;
    const before = previous ? (safeJsonParse(previous.payload) as Record<string, unknown>) : undefined;
    const lookups = new NoLookups();
    const { explanation, matched, changesRead } = await this.evaluateWith(lookups, envelope, computeChanges(resource, before, envelope.data?.changes), position, now);
    if (lookups.asked) return undefined;
    // `changes` as the service sent them are the event's own, whatever the snapshot (computeChanges).
    const readSnapshot = changesRead && !isObject(envelope.data?.changes);
    return { envelope, resource, resourceKnown: previous !== undefined, position, explanation, matched, readSnapshot };
  }

  /**
   * SQLite: the events that a commit recording action outcomes let go (held behind the creates it ended, or claimed
   * for the idle loop: workers.ts), decided in that commit as intake's commit decides new ones: evaluated on what the
   * commit sees (`evaluateHere`) and committed there as the event loop's commit would (`commitAll`), their first runs
   * leased to `handOff` (whose owner holds the events' leases too) as far as it has room. The event loop then has no
   * commit of its own to make for them. `rest`: those left to the loop (see `evaluateHere`), and all of them when
   * anything else throws: what this wrote is rolled back to a savepoint, and the outcomes before it stay in the
   * commit. A storage fault fails the commit.
   */
  async decideLetGo(sql: Statements, claims: ClaimedEvent[], now: string, handOff: HandOff): Promise<LetGoDecided> {
    await sql.run('SAVEPOINT let_go');
    try {
      const known = await this.knownResources(claims, sql);
      const at = new Date(now);
      const prepared: PreparedEvent[] = [];
      const rest: ClaimedEvent[] = [];
      for (const claim of claims) {
        const ready = await this.preparedHere(claim, known, at);
        if (ready === undefined) rest.push(claim);
        else prepared.push(ready);
      }
      const made = await this.committer.commitAll(sql, prepared, handOff.owner, now, handOff);
      await sql.run('RELEASE let_go');
      return { decided: prepared.map((p) => p.claim), rest, made };
    } catch (error) {
      if (storageFaultOf(error)) throw error;
      await sql.run('ROLLBACK TO let_go');
      await sql.run('RELEASE let_go');
      return { decided: [], rest: claims, made: [] };
    }
  }

  private async preparedHere(claim: ClaimedEvent, known: KnownResources, now: Date): Promise<PreparedEvent | undefined> {
    if (claim.evaluated) return { claim, envelope: claim.envelope, ...claim.evaluated };
    const here = await this.evaluateHere(claim, known, now);
    if (here === undefined) return undefined;
    const { envelope, resource, resourceKnown, position, explanation, matched } = here;
    return { claim, verdict: { status: matched.length > 0 ? 'processed' : 'ignored', position, explanation, matched }, resource, envelope, resourceKnown };
  }

  /**
   * An event a rule matched, decided in the commit that stores it (`processed`): that commit writes what the event
   * loop's would (event-commit.ts `recordAtIntake`), and its first runs go to the action loop, leased to `handOff` as
   * far as it has room, once the commit is done (FreshEventsHandOff.take): the event needs no commit of the loop's.
   */
  private async matchedAtIntake(
    sql: Statements,
    event: FreshEvent,
    envelope: EventEnvelope,
    { verdict, resource, resourceKnown }: EvaluatedAtIntake,
    known: KnownResources,
    now: Date,
    handOff: HandOff,
  ): Promise<DecidedEvent<CreatedRun>> {
    const at = isoOf(now);
    const committer = this.committer;
    const processed = this.processedAtIntake;
    const executions = await committer.decideThrottles(sql, verdict, at);
    const { depth, selfCaused } = verdict.position;
    return {
      status: 'processed', depth, selfCaused, explanation: committer.explanationAtIntake(verdict, executions),
      async record(sql, seq) {
        const claim: ClaimedEvent = { seq, event_id: event.event_id, type: event.type, resource_key: event.resource_key, payload: event.payload, depth: event.depth, attempts: 0 };
        const { runs, snapshot } = await committer.recordAtIntake(sql, { claim, verdict, resource, envelope, resourceKnown }, executions, at, handOff);
        // The next event of the commit about the resource compares itself with this one.
        if (event.resource_key !== null && snapshot !== undefined) known.snapshots.set(event.resource_key, { payload: snapshot });
        processed.add(event.event_id);
        return runs;
      },
    };
  }

  /** PostgreSQL: what an event stored decided made (MadeAtIntake.madeBy), counted as `record` counts it on SQLite. */
  private countMade(eventId: string, runs: CreatedRun[]): CreatedRun[] {
    if (runs.length === 0) return runs;
    for (const { execution } of runs) this.metrics.ruleMatched(execution.ruleId, 'matched');
    this.processedAtIntake.add(eventId);
    return runs;
  }

  /**
   * The evaluation intake's last commit made of an event it handed over (a rule matched it), once: the event loop
   * commits it as its own (`prepare`). Asked after that commit, for the events it leased. On PostgreSQL, an event
   * leased held behind a create in flight keeps its evaluation apart instead (`heldEvaluation`), for the commit that
   * lets it go (`sendLetGo`).
   */
  evaluatedAt(event: ClaimedEvent): ClaimedEvent {
    if (event.held !== undefined) {
      const held = this.heldAtIntake.get(event.event_id);
      if (held !== undefined) event.heldEvaluation = held;
      return event;
    }
    const evaluated = this.evaluatedAtIntake.get(event.event_id);
    if (evaluated !== undefined) event.evaluated = evaluated;
    return event;
  }

  /** Of two events with one id in a commit, the first is the one stored: a duplicate's evaluation is not kept in its place. */
  private keepIfHeld(eventId: string, evaluation: HeldEvaluation): void {
    if (!this.heldAtIntake.has(eventId)) this.heldAtIntake.set(eventId, evaluation);
  }

  /**
   * PostgreSQL: the events an outcomes' commit let go, those intake evaluated decided by one statement at its end
   * (let-go-statement.ts), their first runs leased to `handOff` as far as it has room; counted, once that commit is
   * done, as the loop's commit counts its own.
   */
  sendLetGo(sql: Statements, claims: ClaimedEvent[], now: string, handOff: HandOff): Promise<LetGoSent> {
    return sendLetGo(sql, { committer: this.committer, metrics: this.metrics }, claims, now, handOff);
  }

  /** Counts the events intake's commit decided, once it is done, as a commit of the event loop counts its own; how many. */
  countDecided(decided: FreshEvent[]): number {
    for (const event of decided) this.metrics.eventProcessed(event.type, this.processedAtIntake.has(event.event_id) ? 'processed' : 'ignored');
    return decided.length;
  }

  /**
   * Something threw while handling the event (a bug, the database): record it,
   * and try again later, so one poisonous event neither spins nor blocks its
   * resource forever.
   */
  async recordCrash(claim: ClaimedEvent, leaseOwner: string, error: Error): Promise<void> {
    const verdict = this.retryOrFail(claim, { selfCaused: false, depth: claim.depth }, [], `processing failed: ${error.message}`);
    await this.commitAll([{ claim, verdict, resource: undefined }], leaseOwner);
  }

  private async evaluate(claim: ClaimedEvent, envelope: EventEnvelope, changes: Changes, position: ChainPosition): Promise<Verdict> {
    const lookups = new ServiceLookups(this.client);
    const { explanation, matched } = await this.evaluateWith(lookups, envelope, changes, position, this.clock.now());
    if (lookups.failed) return this.retryOrFail(claim, position, explanation, lookups.failed.message);
    return { status: matched.length > 0 ? 'processed' : 'ignored', position, explanation, matched };
  }

  /** The event's listening rules evaluated, and what each that matched needs for its execution. */
  private async evaluateWith(lookups: Lookups, envelope: EventEnvelope, changes: Changes, position: ChainPosition, now: Date) {
    const facts = new EventFacts(envelope, { changes, now, lookups });
    const { evaluations } = await evaluateEvent(this.registry.index, envelope, facts, { selfCaused: position.selfCaused });
    const explanation = evaluations.map(explanationOf);
    const matched: VerdictMatch[] = [];
    for (const evaluation of evaluations) {
      if (evaluation.outcome !== 'matched') continue;
      const rule = evaluation.rule;
      const match: VerdictMatch = { rule, evaluation, throttleKey: this.keyFor('throttle', throttleKey, rule, envelope, now) };
      if (rule.definition.options?.debounce) match.debounceKey = this.keyFor('debounce', debounceKey, rule, envelope, now);
      if (readsFacts(rule)) match.facts = await factsUsedBy(rule, facts);
      matched.push(match);
    }
    return { explanation, matched, changesRead: facts.changesRead };
  }

  private keyFor(what: string, render: typeof throttleKey, rule: LoadedRule, envelope: EventEnvelope, now: Date): string | null {
    try {
      return render(rule, envelope, now);
    } catch (error) {
      // An unrenderable key throttles (or debounces) nothing; the rule still runs and the log says why.
      this.logger.warn({ msg: `${what} key could not be rendered`, rule: rule.id, error: (error as Error).message });
      return null;
    }
  }

  /** A lookup failed: the conditions could not be decided, so the event is evaluated again later. */
  private retryOrFail(claim: ClaimedEvent, position: ChainPosition, explanation: RuleExplanation[], error: string): Verdict {
    const attempt = claim.attempts + 1;
    if (attempt >= this.config.actionMaxAttempts) return { status: 'failed', position, explanation, matched: [], error };
    const retryAt = isoIn(this.clock, backoffDelayMs(attempt, Math.random));
    return { status: 'received', position, explanation, matched: [], error, retryAt };
  }
}
