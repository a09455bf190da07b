/**
 * PostgreSQL: what an event a rule matched makes when intake's commit decides it (its executions, their first runs, its
 * resource's snapshot), written by the one statement that stores the batch (intake/event-insert-sql.ts
 * insertDecidingSql), where SQLite's commit writes them event by event once each has its seq. The event is evaluated
 * before that statement, so its rows are made then, as the event loop's commit makes them (EventCommit.recordAtIntake,
 * into `EventRows`, which keeps them instead of writing them), with no seq yet (NO_SEQ): the statement writes them for
 * the events it stores decided, with the seq it gives each (`MADE_SQL`), and `madeBy` puts that seq into what they
 * made once it has answered. The same statement, not one more after it: intake's commit waiting for the events' seqs
 * before writing their rows cost a round trip a commit, 0.78–0.82× the events a second side by side (session 74).
 * The provenance of a resource a first action changes is written there too, with the run's id. Whatever else a commit
 * would write for an event (a debounce's or a cancel's reads and updates) has no place there: `make` refuses it, and
 * the event loop commits that event.
 */
import { scopeOfEvent, type CausalScope } from '../causal-scope.js';
import { isoOf } from '../clock.js';
import type { Statements } from '../database/statements.js';
import type { EventEnvelope } from '../intake/envelope.js';
import type { DecidedEvent, FreshEvent } from '../intake/event-writer.js';
import { EXECUTION_COLUMNS, INSERT_EXECUTION, SAVE_SNAPSHOT, type EventCommit } from './event-commit.js';
import { SAVE_PROVENANCE } from './execution-progress.js';
import { FIRST_RUN_COLUMNS, FIRST_RUN_TYPES, INSERT_FIRST_RUN } from './first-entry.js';
import { unnestOf } from './batched-statements.js';
import { afterSeq, withSeq } from './new-action-run.js';
import type { ClaimedEvent, CreatedRun, EvaluatedAtIntake, HandOff, VerdictMatch } from './work.js';

/** The seq an event's rows are made with before it has one. */
export const NO_SEQ = 0;

const EXECUTION_SEQ = EXECUTION_COLUMNS.indexOf('event_seq');
const EXECUTION_FIELDS = EXECUTION_COLUMNS.filter((_column, i) => i !== EXECUTION_SEQ);
const RUN_ID = FIRST_RUN_COLUMNS.indexOf('id');
const RUN_EVENT_SEQ = FIRST_RUN_COLUMNS.indexOf('event_seq');
const RUN_FIELDS = FIRST_RUN_COLUMNS.filter((_column, i) => i !== RUN_ID && i !== RUN_EVENT_SEQ);
const RUN_FIELD_TYPES = FIRST_RUN_TYPES.filter((_type, i) => i !== RUN_ID && i !== RUN_EVENT_SEQ);
const HEX_SEQ = "lpad(to_hex(s.seq), 12, '0')";
/** A run's id as actionRunId writes it: its event's seq (`s.seq`) in 12 hex digits, then `<row>.id_rest` (afterSeq). */
const runIdSql = (row: string) => `left(${HEX_SEQ}, 8) || '-' || right(${HEX_SEQ}, 4) || ${row}.id_rest`;

/** What the provenance of a resource changed by a first run is written with, but the run's id (SAVE_PROVENANCE's). */
const PROVENANCE_FIELDS = ['resource_key', 'depth', 'rule_id', 'changed_at'];

/**
 * Definitions for the WITH of intake's statement (after its `stored`: seq, event_id, finished): the executions and
 * first runs of the events it stored decided, with their seqs (and in MADE_WITH_PROVENANCE_SQL the provenance of the
 * resources those runs change); those of an event it did not store decided (held behind a create in flight, its
 * evaluation's assumption not so, a duplicate) are not written. Placeholders: the executions' columns but event_seq;
 * the runs' event_id and id_rest and their columns but id and event_seq; the provenance's event_id and id_rest and
 * PROVENANCE_FIELDS (`written`).
 */
const MADE_SQL = `
  executions_made AS (
    INSERT INTO executions (${EXECUTION_COLUMNS.join(', ')})
    SELECT ${EXECUTION_COLUMNS.map((column) => (column === 'event_seq' ? 's.seq' : `x.${column}`)).join(', ')}
    FROM ${unnestOf(EXECUTION_FIELDS, EXECUTION_FIELDS.map(() => 'text'), 'x')}
    JOIN stored s ON s.event_id = x.event_id AND s.finished),
  runs_made AS (
    INSERT INTO action_runs (${FIRST_RUN_COLUMNS.join(', ')})
    SELECT ${FIRST_RUN_COLUMNS.map((column) => (column === 'id' ? runIdSql('r') : column === 'event_seq' ? 's.seq' : `r.${column}`)).join(', ')}
    FROM ${unnestOf(['event_id', 'id_rest', ...RUN_FIELDS], ['text', 'text', ...RUN_FIELD_TYPES], 'r')}
    JOIN stored s ON s.event_id = r.event_id AND s.finished)`;

/** MADE_SQL with the provenance of the resources the runs change (a statement of its own: most commits have none). */
const MADE_WITH_PROVENANCE_SQL = `${MADE_SQL},
  provenance_made AS (
    INSERT INTO resource_provenance (resource_key, depth, action_run_id, rule_id, changed_at)
    SELECT p.resource_key, p.depth, ${runIdSql('p')}, p.rule_id, p.changed_at
    FROM ${unnestOf(['event_id', 'id_rest', ...PROVENANCE_FIELDS], ['text', 'text', 'text', 'int', 'text', 'text'], 'p')}
    JOIN stored s ON s.event_id = p.event_id AND s.finished
    ON CONFLICT (resource_key) DO UPDATE SET depth = excluded.depth, action_run_id = excluded.action_run_id,
                                             rule_id = excluded.rule_id, changed_at = excluded.changed_at)`;

/** Something a commit would write for the event that the statement does not: the event loop commits it. */
class NotMadeHere extends Error {}

/** The rows one event's commit writes, kept in the columns MADE_SQL takes (a Statements that writes nothing). */
class EventRows implements Statements {
  readonly executions: unknown[][] = [];
  readonly runs: unknown[][] = [];
  /** By resource: of two runs of the event changing one resource, the last one's change is its provenance. */
  readonly provenance = new Map<string, unknown[]>();
  snapshot: string | undefined;

  constructor(private readonly eventId: string) {}

  run(sql: string, params: readonly unknown[] = []): Promise<number> {
    if (sql === INSERT_EXECUTION) this.executions.push(params.filter((_value, i) => i !== EXECUTION_SEQ));
    else if (sql === INSERT_FIRST_RUN) this.runs.push([this.eventId, afterSeq(String(params[RUN_ID])), ...params.filter((_value, i) => i !== RUN_ID && i !== RUN_EVENT_SEQ)]);
    else if (sql === SAVE_SNAPSHOT) this.snapshot = params[1] as string;
    else if (sql === SAVE_PROVENANCE && params[1] !== null) this.provenance.set(String(params[0]), [this.eventId, afterSeq(String(params[3])), params[0], params[1], params[4], params[5]]);
    else throw new NotMadeHere();
    return Promise.resolve(1);
  }

  rows<T>(): Promise<T[]> {
    throw new NotMadeHere();
  }

  insertOne(): Promise<number | undefined> {
    throw new NotMadeHere();
  }

  queue(): Promise<void> {
    throw new NotMadeHere();
  }

  queueRows<T>(): Promise<T[]> {
    throw new NotMadeHere();
  }
}

/** What one intake commit's decided events made, kept for its statement (`written`) and, once it has answered, `madeBy`. */
export class MadeAtIntake {
  private readonly byEvent = new Map<string, { rows: EventRows; runs: CreatedRun[] }>();
  /** The resources the kept events' first runs change. */
  private readonly changed = new Set<string>();

  /**
   * The rows `write` makes for an event (with NO_SEQ where its seq goes), kept for the statement, and the resource's
   * snapshot it saves; undefined when it writes anything else (NotMadeHere), or changes a resource an event kept
   * before it changes too (the statement writes one provenance a resource, and that event may not be stored decided):
   * then nothing of it is kept.
   */
  async make(eventId: string, write: (sql: Statements) => Promise<{ runs: CreatedRun[] }>): Promise<{ snapshot: string | undefined } | undefined> {
    const rows = new EventRows(eventId);
    try {
      const { runs } = await write(rows);
      if ([...rows.provenance.keys()].some((key) => this.changed.has(key))) return undefined;
      for (const key of rows.provenance.keys()) this.changed.add(key);
      this.byEvent.set(eventId, { rows, runs });
      return { snapshot: rows.snapshot };
    } catch (error) {
      if (error instanceof NotMadeHere) return undefined;
      throw error;
    }
  }

  /** The statement's definitions with their placeholders' values (the kept rows as columns); undefined when nothing was kept. */
  written(): { sql: string; params: unknown[] } | undefined {
    if (this.byEvent.size === 0) return undefined;
    const made = [...this.byEvent.values()];
    const executions = made.flatMap(({ rows }) => rows.executions);
    const runs = made.flatMap(({ rows }) => rows.runs);
    // One row a resource (an ON CONFLICT statement may not change a row twice): no two events kept change one (`make`).
    const provenance = made.flatMap(({ rows }) => [...rows.provenance.values()]);
    const columns = (rows: unknown[][], count: number) => Array.from({ length: count }, (_c, i) => rows.map((row) => row[i] ?? null));
    const params = [...columns(executions, EXECUTION_FIELDS.length), ...columns(runs, RUN_FIELDS.length + 2)];
    if (provenance.length === 0) return { sql: MADE_SQL, params };
    return { sql: MADE_WITH_PROVENANCE_SQL, params: [...params, ...columns(provenance, PROVENANCE_FIELDS.length + 2)] };
  }

  /** What the event made, its seq (stored with `seq`) put where NO_SEQ was: in its runs' ids and rows, and their executions. */
  madeBy(eventId: string, seq: number): CreatedRun[] {
    const runs = this.byEvent.get(eventId)?.runs ?? [];
    for (const { run, execution } of runs) {
      run.id = withSeq(run.id, seq);
      run.event_seq = seq;
      execution.eventSeq = seq;
    }
    return runs;
  }
}

/** PostgreSQL: what intake's decider knows of the statement that stores its batch (EventProcessor.deciderAtIntake). */
export class IntakeStatement {
  /** The resources whose snapshot an evaluation read (AssumingDecider.readSnapshot: it assumed there was none). */
  readonly readSnapshot = new Set<string>();
  readonly made = new MadeAtIntake();

  /** `holds`: whether events of a scope are parked behind creates in flight (ParkedEvents.holds). */
  constructor(
    private readonly committer: EventCommit,
    private readonly holds: (scope: CausalScope) => boolean = () => false,
  ) {}

  /**
   * An event a rule matched, decided in the statement that stores it: its executions and first runs made now, as
   * EventCommit.recordAtIntake writes them, with no seq yet, for that statement to write. Undefined (the event loop
   * commits it, with this evaluation) where a matched rule counts or waits on what came before it (a throttle, a
   * debounce: the loop's commit reads those), where its commit would write anything else (`make`), and where the event
   * will likely be found held behind a create in flight, as others of its scope are, so that what was made of it would
   * be thrown away (nearly every event of the benchmark's own load, whose rule creates tasks in the project of the
   * tasks its events are about: 1.16× the main thread's CPU an event, side by side, until this was asked; session 74).
   */
  async matched(sql: Statements, event: FreshEvent, envelope: EventEnvelope, evaluated: EvaluatedAtIntake, now: Date, handOff: HandOff): Promise<DecidedEvent<CreatedRun> | undefined> {
    const { verdict, resource, resourceKnown } = evaluated;
    if (verdict.matched.some(countsWhatCameBefore) || this.likelyHeld(event.resource_key, envelope)) return undefined;
    const at = isoOf(now);
    const committer = this.committer;
    const executions = await committer.decideThrottles(sql, verdict, at);
    const claim: ClaimedEvent = { seq: NO_SEQ, event_id: event.event_id, type: event.type, resource_key: event.resource_key, payload: event.payload, depth: event.depth, attempts: 0 };
    const prepared = { claim, verdict, resource, envelope, resourceKnown };
    // Its matches are counted once it is stored decided (EventProcessor's madeBy), not now.
    const kept = await this.made.make(event.event_id, (rows) => committer.recordAtIntake(rows, prepared, executions, at, handOff, false));
    if (kept === undefined) return undefined;
    const { depth, selfCaused } = verdict.position;
    return {
      status: 'processed', depth, selfCaused, explanation: committer.explanationAtIntake(verdict, executions), snapshot: kept.snapshot,
      // Never asked on PostgreSQL: the statement that stores the event writes what it made (MADE_SQL).
      record: () => Promise.resolve([]),
    };
  }

  /** Whether events of the event's scope are parked behind creates in flight: the statement will likely find it held too. */
  likelyHeld(key: string | null, envelope: EventEnvelope): boolean {
    const scope = scopeOfEvent(key, envelope.data);
    return scope !== null && this.holds(scope);
  }
}

/** Whether a matched rule's execution counts or waits on those before it (a throttle, a debounce): decided in order, reading. */
export function countsWhatCameBefore({ rule }: VerdictMatch): boolean {
  const options = rule.definition.options;
  return Boolean(options?.throttle || options?.debounce);
}
