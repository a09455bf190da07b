/**
 * PostgreSQL plans the claim from table statistics; when a backlog builds up
 * faster than autovacuum refreshes them (a burst, a new database), the plan
 * turns quadratic, and intake's check for a seen resource scans every
 * snapshot. The work queue asks for fresh statistics, at most every few
 * seconds, while claims are slow or the queue is busy.
 *
 * Only the tables that changed by more than a tenth since their last ANALYZE
 * (and 50 rows: autovacuum's own threshold, checked every few seconds rather
 * than every minute) are analyzed again. ANALYZE reads a sample of 30,000 rows
 * whatever the table's size: analyzing every table every five seconds was
 * about a fifth of the server's busy time while 200,000 waiting events were
 * drained (pg_stat_activity samples), for statistics that 2,600 changed rows
 * had not made stale.
 */
import type { EntityManager } from 'typeorm';
import { queryRows } from '../database/sql.js';

/** The tables whose statistics the hot path's plans depend on. */
export const PLANNED_TABLES: readonly string[] = ['events', 'action_runs', 'resource_snapshots', 'resource_provenance', 'executions'];

const STALE = `SELECT s.relname AS name FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema() AND s.relname = ANY(?::text[])
    AND s.n_mod_since_analyze > 50 + 0.1 * GREATEST(c.reltuples, 0)
  ORDER BY s.relname`;

/** Of `tables`, those whose statistics are stale (PostgreSQL). */
export async function staleTables(manager: EntityManager, tables: readonly string[] = PLANNED_TABLES): Promise<string[]> {
  const rows = await queryRows<{ name: string }>(manager, STALE, [tables]);
  return rows.map((row) => row.name);
}

/** Analyzes the stale ones of `tables`; returns them. */
export async function refreshStaleStatistics(manager: EntityManager, tables: readonly string[] = PLANNED_TABLES): Promise<string[]> {
  const stale = await staleTables(manager, tables);
  // The names are those of PLANNED_TABLES (or the caller's), as the catalogue spells them.
  if (stale.length > 0) await queryRows(manager, `ANALYZE ${stale.map((name) => `"${name}"`).join(', ')}`);
  return stale;
}
