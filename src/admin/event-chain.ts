/**
 * The chain an event is part of, as far as the engine can tell it afterwards:
 * which engine action caused it (an event about a resource an action created
 * or changed shortly before is self-caused, processing/loop-guard.ts), and
 * which events the actions of this event caused. Provenance is kept per
 * resource and only for the latest action, so the cause is looked up there
 * first and, when a later action has replaced it, among the action runs whose
 * request or answer names the resource.
 */
import { touchedResource } from '../actions/action-types.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import type { ActionRunEntity } from '../database/action-run.entity.js';
import type { EventEntity } from '../database/event.entity.js';
import { queryRows } from '../database/sql.js';
import type { EntityManager } from 'typeorm';
import { parseStoredJson } from '../json.js';
import { SELF_CAUSED_WINDOW_MS } from '../processing/loop-guard.js';

export interface ChainLink {
  event_id: string;
  type?: string;
  status?: string;
  action_run: string;
  action_type: string;
  rule: string;
  at: string;
}

interface RunRow {
  id: string;
  type: string;
  rule_id: string;
  request: string | null;
  response: string | null;
  created_at: string;
  updated_at: string;
  event_id: string;
}

const RUN_COLUMNS = `a.id, a.type, a.rule_id, a.request, a.response, a.created_at, a.updated_at, e.event_id`;

/** `<kind>:<id>` of what a stored run created or changed, when it can be told. */
export function touchedBy(run: { type: string; request: string | null; response: string | null }): string | null {
  const request = parseStoredJson(run.request) as ServiceRequest | null;
  if (!request || typeof request !== 'object') return null;
  try {
    return touchedResource(run.type, request, parseStoredJson(run.response));
  } catch {
    return null;
  }
}

const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

function link(run: RunRow): ChainLink {
  return { event_id: run.event_id, action_run: run.id, action_type: run.type, rule: run.rule_id, at: run.updated_at };
}

/** The action run that made `event` self-caused, with the event that started it. */
export async function causeOf(manager: EntityManager, event: EventEntity): Promise<ChainLink | null> {
  const key = event.resourceKey;
  if (!key || !event.selfCaused) return null;
  const fits = (run: RunRow) => touchedBy(run) === key && run.created_at <= event.receivedAt && run.event_id !== event.eventId;
  const viaProvenance = await queryRows<RunRow>(
    manager,
    `SELECT ${RUN_COLUMNS} FROM resource_provenance p JOIN action_runs a ON a.id = p.action_run_id JOIN events e ON e.seq = a.event_seq
     WHERE p.resource_key = ?`,
    [key],
  );
  const found = viaProvenance.find(fits);
  if (found) return link(found);
  const id = key.slice(key.indexOf(':') + 1);
  const pattern = `%"${likeEscape(JSON.stringify(id).slice(1, -1))}"%`;
  const candidates = await queryRows<RunRow>(
    manager,
    `SELECT ${RUN_COLUMNS} FROM action_runs a JOIN events e ON e.seq = a.event_seq
     WHERE a.event_seq < ? AND (a.request LIKE ? ESCAPE '\\' OR a.response LIKE ? ESCAPE '\\')
     ORDER BY a.updated_at DESC LIMIT 50`,
    [event.seq, pattern, pattern],
  );
  const cause = candidates.find(fits);
  return cause ? link(cause) : null;
}

/** Events about the resources this event's action runs created or changed, that the engine took for their echo. */
export async function consequencesOf(manager: EntityManager, event: EventEntity, runs: ActionRunEntity[]): Promise<ChainLink[]> {
  const links: ChainLink[] = [];
  for (const run of runs) {
    const key = touchedBy(run);
    if (!key) continue;
    const until = new Date(Date.parse(run.updatedAt) + SELF_CAUSED_WINDOW_MS).toISOString();
    const echoes = await queryRows<{ event_id: string; type: string; status: string; received_at: string }>(
      manager,
      `SELECT event_id, type, status, received_at FROM events
       WHERE resource_key = ? AND seq > ? AND self_caused = ? AND received_at >= ? AND received_at <= ?
       ORDER BY seq LIMIT 20`,
      [key, event.seq, true, run.createdAt, until],
    );
    for (const echo of echoes) {
      links.push({ event_id: echo.event_id, type: echo.type, status: echo.status, action_run: run.id, action_type: run.type, rule: run.ruleId, at: echo.received_at });
    }
  }
  return links;
}
