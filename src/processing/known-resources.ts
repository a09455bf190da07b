/**
 * What the engine knows of the resources a batch of events is about, read for the whole batch: their snapshots (the
 * last version seen, which the next event's `changes` are computed from) and their provenance (which engine action
 * touched them last, for the loop guard). Plain statements (database/statements.ts): the event loop reads them for
 * every batch it evaluates, and SQLite's commits that decide events read them inside the commit.
 */
import type { DatabaseKind } from '../database/data-source.js';
import type { Statements } from '../database/statements.js';
import type { ClaimedEvent } from './work.js';

/** What the engine knows of the resources a batch is about: their last version, and which engine action touched them. */
export interface KnownResources {
  snapshots: Map<string, { payload: string }>;
  provenance: Map<string, { depth: number; changedAt: string; ruleId: string }>;
}

const SNAPSHOTS = (n: number) => `SELECT resource_key, payload FROM resource_snapshots WHERE resource_key IN (${Array(n).fill('?').join(', ')})`;
const PROVENANCE = (n: number) =>
  `SELECT resource_key, depth, changed_at, rule_id FROM resource_provenance WHERE resource_key IN (${Array(n).fill('?').join(', ')})`;
/**
 * PostgreSQL: snapshots and provenance in one statement (one round trip) whatever the batch size, and one
 * primary-key probe per key and table (LATERAL … LIMIT 1 cannot become a hash join), so a young table with stale
 * statistics is never read whole. A key with neither is left out.
 */
const KNOWN_PG = `SELECT k.key AS resource_key, s.payload, p.depth, p.changed_at, p.rule_id FROM unnest(?::text[]) AS k(key)
  LEFT JOIN LATERAL (SELECT payload FROM resource_snapshots WHERE resource_key = k.key LIMIT 1) s ON true
  LEFT JOIN LATERAL (SELECT depth, changed_at, rule_id FROM resource_provenance WHERE resource_key = k.key LIMIT 1) p ON true
  WHERE s.payload IS NOT NULL OR p.changed_at IS NOT NULL`;
interface KnownRow {
  resource_key: string;
  payload: string | null;
  depth: number | null;
  changed_at: string | null;
  rule_id: string | null;
}

function knownOf(rows: KnownRow[]): KnownResources {
  const known: KnownResources = { snapshots: new Map(), provenance: new Map() };
  for (const row of rows) {
    if (row.payload !== null) known.snapshots.set(row.resource_key, { payload: row.payload });
    if (row.changed_at !== null) known.provenance.set(row.resource_key, { depth: Number(row.depth), changedAt: row.changed_at, ruleId: row.rule_id! });
  }
  return known;
}

/**
 * The snapshots and provenance of the resources `claims` are about (one statement on PostgreSQL, two on SQLite).
 * SQLite: no snapshot is looked up for an event held behind a create in flight: its resource had none when intake
 * stored it (a held resource is unseen), and none is saved before the event is committed, being first in line for its
 * resource. Its provenance is what the create may have left meanwhile.
 */
export async function readKnownResources(kind: DatabaseKind, sql: Statements, claims: Array<Pick<ClaimedEvent, 'resource_key' | 'held'>>): Promise<KnownResources> {
  const keys = [...new Set(claims.map((c) => c.resource_key).filter((k): k is string => k !== null))];
  if (keys.length === 0) return { snapshots: new Map(), provenance: new Map() };
  if (kind === 'postgres') return knownOf(await sql.rows<KnownRow>(KNOWN_PG, [keys]));
  const mayHaveOne = [...new Set(claims.filter((c) => c.resource_key !== null && c.held === undefined).map((c) => c.resource_key!))];
  const snapshots = mayHaveOne.length === 0 ? [] : await sql.rows<{ resource_key: string; payload: string }>(SNAPSHOTS(mayHaveOne.length), mayHaveOne);
  const provenance = await sql.rows<{ resource_key: string; depth: number; changed_at: string; rule_id: string }>(PROVENANCE(keys.length), keys);
  return {
    snapshots: new Map(snapshots.map((s) => [s.resource_key, s])),
    provenance: new Map(provenance.map((p) => [p.resource_key, { depth: Number(p.depth), changedAt: p.changed_at, ruleId: p.rule_id }])),
  };
}
