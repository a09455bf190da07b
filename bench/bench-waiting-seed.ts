/**
 * The waiting executions of the `waiting` part (bench-waiting.ts), made the way
 * the engine makes them, in seconds instead of minutes: the engine itself
 * evaluates one event against a rule that starts with a three-day delay and
 * writes, in that event's commit, every row a waiting execution has (the
 * event, processed, with its explanation; the execution, `waiting`, with
 * `resume_at`; its delay run, `pending`, due at the resume time; the task's
 * snapshot). Those rows are then copied N - 1 times in SQL, column by column
 * as the database lists them (so a column added later is copied too), with the
 * ids replaced in every text column: each copy is about a task of its own, has
 * an event, an execution and a run id of its own, and points at its own event's
 * seq. Any other table that the template's commit wrote to stops the part
 * (the copies would then not be what the engine writes).
 *
 * The copies differ from what the engine would have written for N events in
 * two ways that claiming and memory do not see: all are due at the same
 * instant (three days after the template), and a copy's run id is a
 * UUID-shaped counter rather than the hash of its event, rule and position
 * (new-action-run.ts), which only matters once the run is sent.
 */
import type { Database } from '../src/database/database.service.js';
import { checkpointPostgres } from './bench-databases.js';

export const WAIT_RULE_ID = 'bench-wait-three-days';

/** A rule whose first step is a delay: its executions wait three days, then act. */
export const WAIT_RULE = {
  id: WAIT_RULE_ID,
  name: 'Benchmark: follow up three days after a task is created',
  on: 'task.created',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Wait' }] },
  actions: [
    { type: 'delay', params: { duration: 'P3D' } },
    { type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Three days after {{ event.id }}' } },
  ],
};

/** The event the template is made from: `task.created` about a task of its own, titled for WAIT_RULE. */
export function waitEvent(eventId: string) {
  return {
    id: eventId,
    type: 'task.created',
    created_at: new Date().toISOString(),
    data: { task: { id: `tsk_${eventId}`, project_id: 'prj_1', title: `Wait task ${eventId}`, status: 'open', assignee_id: null } },
  };
}

/** The rows the engine wrote for the template event. */
export interface Template {
  eventId: string;
  seq: number;
  executionId: string;
  runId: string;
  resourceKey: string;
  /** The delay run's updated_at: a copy whose run is touched (claimed, leased, changed) shows a later one. */
  runUpdatedAt: string;
}

/** The tables a waiting execution's commit writes to, and how each finds the template's row. */
const CLONED: Record<string, (t: Template) => string> = {
  events: (t) => `t.seq = ${t.seq}`,
  executions: (t) => `t.id = ${literal(t.executionId)}`,
  action_runs: (t) => `t.id = ${literal(t.runId)}`,
  resource_snapshots: (t) => `t.resource_key = ${literal(t.resourceKey)}`,
};

const literal = (s: string): string => `'${s.replace(/'/g, "''")}'`;

async function rows<T>(db: Database, sql: string): Promise<T[]> {
  return (await db.dataSource.query(sql)) as T[];
}

async function count(db: Database, sql: string): Promise<number> {
  const [row] = await rows<{ n: number | string }>(db, sql);
  return Number(row?.n ?? 0);
}

/** Rows per table: compared before and after the template's commit. */
export async function tableCounts(db: Database): Promise<Map<string, number>> {
  const names = db.kind === 'sqlite'
    ? await rows<{ name: string }>(db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
    : await rows<{ name: string }>(db, 'SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()');
  const counts = new Map<string, number>();
  for (const { name } of names) counts.set(name, await count(db, `SELECT COUNT(*) AS n FROM "${name}"`));
  return counts;
}

/** The tables the template's commit added rows to that are not copied; empty when the copies are complete. */
export function uncopiedTables(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...after].filter(([name, n]) => n > (before.get(name) ?? 0) && !(name in CLONED)).map(([name]) => name);
}

/** The template's rows, once the engine has committed its event; undefined until then. */
export async function findTemplate(db: Database, eventId: string): Promise<Template | undefined> {
  const [event] = await rows<{ seq: number | string; resource_key: string }>(db, `SELECT seq, resource_key FROM events WHERE event_id = ${literal(eventId)} AND status = 'processed'`);
  if (!event) return undefined;
  const [run] = await rows<{ id: string; execution_id: string; updated_at: string }>(db, `
    SELECT r.id, r.execution_id, r.updated_at FROM action_runs r JOIN executions x ON x.id = r.execution_id
    WHERE x.event_seq = ${Number(event.seq)} AND x.status = 'waiting' AND r.type = 'delay' AND r.status = 'pending'`);
  if (!run) return undefined;
  return { eventId, seq: Number(event.seq), executionId: run.execution_id, runId: run.id, resourceKey: event.resource_key, runUpdatedAt: run.updated_at };
}

async function columnsOf(db: Database, table: string): Promise<Array<{ name: string; text: boolean }>> {
  const listed = db.kind === 'sqlite'
    ? await rows<{ name: string; type: string }>(db, `PRAGMA table_info("${table}")`)
    : await rows<{ name: string; type: string }>(db, `
        SELECT column_name AS name, data_type AS type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ${literal(table)} ORDER BY ordinal_position`);
  return listed.map((c) => ({ name: c.name, text: /char|text|clob/i.test(c.type) }));
}

/** A UUID-shaped id from the copy's number, one pattern per kind of row. */
function idOf(kind: Database['kind'], middle: string): string {
  return kind === 'sqlite'
    ? `printf('%08x-${middle}-%012x', n.i, n.i)`
    : `lpad(to_hex(n.i), 8, '0') || '-${middle}-' || lpad(to_hex(n.i), 12, '0')`;
}

/** INSERT … SELECT of `copies` copies of the template's row of `table`, numbered 1 … copies. */
function copySql(db: Database, table: string, columns: Array<{ name: string; text: boolean }>, t: Template, prefix: string, copies: number): string {
  const eventId = `${literal(prefix)} || CAST(n.i AS text)`;
  const replaced = (column: string) =>
    `REPLACE(REPLACE(REPLACE(t.${column}, ${literal(t.eventId)}, ${eventId}), ${literal(t.executionId)}, ${idOf(db.kind, '0000-4000-8000')}), ${literal(t.runId)}, ${idOf(db.kind, '0000-5000-a000')})`;
  const kept = columns.filter((c) => !(table === 'events' && c.name === 'seq'));
  const values = kept.map((c) => (c.name === 'event_seq' ? 'e.seq' : c.text ? replaced(c.name) : `t.${c.name}`));
  const ownEvent = kept.some((c) => c.name === 'event_seq') ? `JOIN events e ON e.event_id = ${eventId}` : '';
  const names = kept.map((c) => c.name).join(', ');
  const select = `SELECT ${values.join(', ')} FROM ${table} t CROSS JOIN numbers n ${ownEvent} WHERE ${CLONED[table](t)}`;
  return db.kind === 'sqlite'
    ? `WITH RECURSIVE numbers(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM numbers WHERE i < ${copies}) INSERT INTO ${table} (${names}) ${select}`
    : `INSERT INTO ${table} (${names}) ${select.replace('numbers n', `generate_series(1, ${copies}) AS n(i)`)}`;
}

/** Copies the template's rows so that `total` executions wait, in one transaction, with the engine stopped. */
export async function copyTemplate(db: Database, t: Template, prefix: string, total: number): Promise<void> {
  const copies = total - 1;
  if (copies < 1) return;
  const statements: string[] = [];
  // Events first: the other rows find their own event's seq by its id.
  for (const table of Object.keys(CLONED)) statements.push(copySql(db, table, await columnsOf(db, table), t, prefix, copies));
  await db.dataSource.transaction(async (manager) => {
    for (const sql of statements) await manager.query(sql);
  });
}

/**
 * Before each run, with the engine stopped: PostgreSQL's tables vacuumed and
 * analysed, as autovacuum would have done while 100,000 executions
 * accumulated over days (right after a bulk insert, autovacuum would otherwise
 * do it during the run, and the run would measure the insert, not the
 * waiting), then the server checkpointed (where the benchmark's user may), as
 * SQLite's write-ahead log is checkpointed into its file: the copy's writes
 * are not left to a checkpoint during the timed claims (bench-databases.ts).
 */
export async function settleStorage(db: Database): Promise<void> {
  if (db.kind === 'postgres') {
    await db.dataSource.query(`VACUUM ANALYZE ${Object.keys(CLONED).join(', ')}`);
    await checkpointPostgres((sql) => db.dataSource.query(sql));
  } else {
    await db.dataSource.query('PRAGMA wal_checkpoint(TRUNCATE)');
  }
}

/** Executions of the wait rule still waiting, and delay runs as the engine left them (pending, unleased, never attempted, unchanged). */
export async function stillWaiting(db: Database, t: Template): Promise<{ executions: number; runs: number }> {
  const executions = await count(db, `SELECT COUNT(*) AS n FROM executions WHERE rule_id = ${literal(WAIT_RULE_ID)} AND status = 'waiting'`);
  const runs = await count(db, `
    SELECT COUNT(*) AS n FROM action_runs WHERE rule_id = ${literal(WAIT_RULE_ID)} AND type = 'delay' AND status = 'pending'
      AND attempts = 0 AND lease_owner IS NULL AND updated_at = ${literal(t.runUpdatedAt)}`);
  return { executions, runs };
}
