/**
 * Records how an execution moves on after an attempt: the run's outcome (only
 * while this worker still holds its lease: a run taken over by another worker
 * changes nothing), the resource the action touched (loop protection), and the
 * execution's next step: the next action's run, or the execution's end.
 * Outcomes of runs that finish together share one commit (group commit), in
 * plain statements (database/statements.ts): this runs for every action.
 *
 * An outcome may let events go: the next event about the run's resource, and
 * events held behind a create in flight (the causal barrier). The commit that
 * records outcomes also claims, for this process's event loop, the events it
 * let go (`handOffTo`), as intake's commit leases the events it stores: the
 * claim query then runs in a transaction that was being made anyway, and the
 * event loop need not claim after every run that ends. On SQLite the same
 * commit decides them too (workers.ts, EventProcessor.decideLetGo).
 */
import { Injectable, Logger } from '@nestjs/common';
import { touchedResource } from '../actions/action-types.js';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import type { DatabaseKind } from '../database/data-source.js';
import { Database } from '../database/database.service.js';
import { GroupCommit } from '../database/group-commit.js';
import type { HandedOver } from '../intake/event-writer.js';
import { statementsOf, type Statements } from '../database/statements.js';
import { Metrics } from '../observability/metrics.js';
import { emitActionRunFailed } from './engine-events.js';
import { advanceExecution } from './execution-steps.js';
import { recordOutcomes, requestToRecord, responseToRecord, type Outcome, type OutcomeSteps } from './outcome-batch.js';
import type { RuleSnapshot } from './rule-snapshot.js';
import type { ClaimedActionRun, LoadedExecution } from './work.js';


const EXECUTION_COLUMNS = 'x.id, x.event_seq, x.event_id, x.rule_id, x.rule_snapshot, x.facts, e.type AS event_type, e.depth';
const LOAD_EXECUTION = `SELECT ${EXECUTION_COLUMNS} FROM executions x JOIN events e ON e.seq = x.event_seq WHERE x.id = ?`;
/** The executions of a batch (of outcomes, of claimed runs) at once: ids as an array (PostgreSQL) or a JSON array (SQLite). */
const LOAD_EXECUTIONS = {
  postgres: `SELECT ${EXECUTION_COLUMNS} FROM executions x JOIN events e ON e.seq = x.event_seq WHERE x.id = ANY(?::text[])`,
  sqlite: `SELECT ${EXECUTION_COLUMNS} FROM executions x JOIN events e ON e.seq = x.event_seq WHERE x.id IN (SELECT value FROM json_each(?))`,
} as const;

interface ExecutionRow {
  id: string; event_seq: number; event_id: string; rule_id: string; rule_snapshot: string; facts: string | null; event_type: string; depth: number;
}

function loadedOf(row: ExecutionRow): LoadedExecution {
  return {
    id: row.id, eventSeq: Number(row.event_seq), eventId: row.event_id, ruleId: row.rule_id, rule: JSON.parse(row.rule_snapshot) as RuleSnapshot,
    eventType: row.event_type, eventDepth: Number(row.depth), facts: row.facts === null ? undefined : (JSON.parse(row.facts) as Record<string, unknown>),
  };
}
const RECORD_OUTCOME = `
  UPDATE action_runs SET status = ?, lease_owner = NULL, lease_until = NULL, next_attempt_at = ?, updated_at = ?, request = COALESCE(?, request),
                         response_status = ?, response = ?, error_code = ?, error_message = ?
  WHERE id = ? AND lease_owner = ? AND status = 'running'`;
export const SAVE_PROVENANCE = `
  INSERT INTO resource_provenance (resource_key, depth, action_run_id, rule_id, changed_at)
  VALUES (?, COALESCE(?, (SELECT depth FROM events WHERE seq = ?), 0), ?, ?, ?)
  ON CONFLICT (resource_key) DO UPDATE SET depth = excluded.depth, action_run_id = excluded.action_run_id,
                                           rule_id = excluded.rule_id, changed_at = excluded.changed_at`;

/**
 * How the commit that records outcomes hands the events they let go to the
 * event loop (workers.ts): `lease` runs inside that commit and claims what the
 * loop has room for; `take` gets them once the commit is done, with the runs
 * whose outcomes it recorded. `complete`: nothing else the commit's runs let
 * go waits for the event loop's claim (SQLite: the commit's claim had room to
 * spare; PostgreSQL: what the hand-off asks, outcomes-hand-off.ts), so their
 * ends need not wake it.
 */
export interface UnblockedEventsHandOff<T> {
  /** `ended`: the runs whose outcomes the commit recorded. */
  lease(sql: Statements, ended: ClaimedActionRun[]): Promise<HandedOver<T>>;
  take(events: T[], complete: boolean, runs: string[]): void;
}

export async function loadExecution(sql: Statements, claim: Pick<ClaimedActionRun, 'id' | 'execution_id'>): Promise<LoadedExecution> {
  const [row] = await sql.rows<ExecutionRow>(LOAD_EXECUTION, [claim.execution_id]);
  if (!row) throw new Error(`execution ${claim.execution_id} of action run ${claim.id} is missing`);
  return loadedOf(row);
}

/** Executions by id, with one statement; an id with no execution is left out. */
export async function loadExecutions(sql: Statements, kind: DatabaseKind, ids: string[]): Promise<Map<string, LoadedExecution>> {
  const rows = await sql.rows<ExecutionRow>(LOAD_EXECUTIONS[kind], [kind === 'postgres' ? ids : JSON.stringify(ids)]);
  return new Map(rows.map((row) => [row.id, loadedOf(row)]));
}

/**
 * The resource an action created or changed: an event about it soon after is the engine's own doing. Its depth is
 * that of the run's event: `depth` when the caller has it (its execution in hand), else read from the event.
 */
export async function saveProvenance(sql: Statements, claim: ClaimedActionRun, resourceKey: string | null, now: string, depth?: number): Promise<void> {
  if (resourceKey) await sql.run(SAVE_PROVENANCE, [resourceKey, depth ?? null, claim.event_seq, claim.id, claim.rule_id, now]);
}

@Injectable()
export class ExecutionProgress {
  private readonly logger = new Logger('actions');
  private readonly outcomes: GroupCommit<Outcome, boolean>;
  private readonly kind: DatabaseKind;
  private handOff: UnblockedEventsHandOff<unknown> | undefined;
  /** What the batch being committed claimed (one batch at a time: GroupCommit flushes in turn). */
  private unblocked: (HandedOver<unknown> & { runs: string[] }) | undefined;

  constructor(
    private readonly metrics: Metrics,
    db: Database,
  ) {
    this.kind = db.kind;
    // SQLite: a batch waits a turn while outcomes keep arriving, as intake's does; without it the outcomes committed in
    // the turns intake's batch waits went in batches half the size (docs/performance-log.md, session 52).
    const holdWhileArriving = db.kind === 'sqlite';
    this.outcomes = new GroupCommit(db, (manager, batch) => this.recordAll(statementsOf(manager), batch), { holdWhileArriving }, () => this.committed());
  }

  /** Claims the events that the outcomes of each commit let go, for the event loop (at most one hand-off). */
  handOffTo<T>(handOff: UnblockedEventsHandOff<T>): void {
    this.handOff = handOff as UnblockedEventsHandOff<unknown>;
  }

  /** Commits the outcome (with others that finish meanwhile); false when the lease was lost and someone else owns the run now. */
  record(claim: ClaimedActionRun, owner: string, result: AttemptOutcome, now: string, loaded?: LoadedExecution): Promise<boolean> {
    return this.outcomes.submit({ claim, owner, result, now, loaded });
  }

  private async recordAll(sql: Statements, batch: Outcome[]): Promise<boolean[]> {
    this.unblocked = undefined;
    let recorded: boolean[];
    // PostgreSQL: a few statements for the whole batch (outcome-batch.ts); SQLite's statements run in process.
    if (this.kind === 'postgres' && batch.length > 1) recorded = await recordOutcomes(sql, batch, this.steps);
    else {
      recorded = [];
      for (const outcome of batch) recorded.push(await this.recordOne(sql, outcome));
    }
    const ended = batch.filter((_outcome, i) => recorded[i]).map((o) => o.claim);
    const runs = ended.map((claim) => claim.id);
    if (this.handOff && runs.length > 0) this.unblocked = { ...(await this.handOff.lease(sql, ended)), runs };
    return recorded;
  }

  /** After a commit that recorded outcomes: what it claimed, to the event loop. */
  private committed(): void {
    const unblocked = this.unblocked;
    this.unblocked = undefined;
    if (unblocked) this.handOff?.take(unblocked.events, unblocked.complete, unblocked.runs);
  }

  private async recordOne(sql: Statements, outcome: Outcome): Promise<boolean> {
    const { claim, owner, result, now, loaded } = outcome;
    const changed = await sql.run(RECORD_OUTCOME, [
      result.status, result.nextAttemptAt ?? now, now, requestToRecord(result), result.responseStatus ?? null,
      responseToRecord(result), result.errorCode ?? null, result.errorMessage ?? null, claim.id, owner,
    ]);
    if (!changed) return false;
    this.recorded(outcome);
    if (result.status === 'succeeded' && result.request) {
      await saveProvenance(sql, claim, touchedResource(claim.type, result.request, result.response), now, loaded?.eventDepth);
    }
    if (result.status === 'retrying') return true;
    await this.advance(sql, outcome, loaded ?? (await loadExecution(sql, claim)));
    return true;
  }

  private readonly steps: OutcomeSteps = {
    load: (sql, ids) => loadExecutions(sql, this.kind, ids),
    recorded: (outcome) => this.recorded(outcome),
    advance: (sql, outcome, execution) => this.advance(sql, outcome, execution),
  };

  private recorded({ claim, result }: Outcome): void {
    this.metrics.actionRun(claim.type, result.status, result.seconds);
    if (result.status === 'failed') {
      this.logger.warn({ msg: 'action failed', run: claim.id, rule: claim.rule_id, type: claim.type, code: result.errorCode, error: result.errorMessage });
    }
  }

  /** After a run ended for good: a failure's engine event, then the execution's next step or its end. */
  private async advance(sql: Statements, { claim, result, now }: Outcome, execution: LoadedExecution): Promise<void> {
    if (result.status === 'failed') await emitActionRunFailed(sql, claim, execution, result, now);
    await advanceExecution(sql, this.kind, claim, { failed: result.status === 'failed', errorCode: result.errorCode, errorMessage: result.errorMessage }, now, execution);
  }
}
