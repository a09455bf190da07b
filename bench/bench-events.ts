/**
 * The events the benchmark sends. Every event is about a task of its own (so
 * per-resource ordering never holds one back) and its id is `<prefix><i>`,
 * which the action's title carries back to the fake service.
 *
 *   matching   `task.created`, title "Bench task i": the benchmark rule (and
 *              the reference server's hard-coded condition) answers it with
 *              one `POST /v1/tasks` titled "Follow-up <event id>";
 *   unmatched  `task.updated`, title "Routine update": the rule listens to it
 *              and evaluates its condition, which fails; no action.
 */
import type { WaitingEvent } from './bench-databases.js';
import { BENCH_SECRET } from './bench-engine.js';
import { prepareEvents, type PreparedEvent } from './bench-load.js';

export type EventKind = 'matching' | 'unmatched';

function event(kind: EventKind, prefix: string, i: number) {
  const matching = kind === 'matching';
  return {
    id: `${prefix}${i}`,
    type: matching ? 'task.created' : 'task.updated',
    created_at: new Date().toISOString(),
    data: {
      task: {
        id: `tsk_${prefix}${i}`, project_id: 'prj_1', title: matching ? `Bench task ${i}` : 'Routine update',
        status: 'open', assignee_id: matching ? null : 'usr_1',
      },
    },
  };
}

/** A fresh id prefix per run, so no run's events or actions are mistaken for another's. */
export function runPrefix(what: string): string {
  return `evt_${what}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}_`;
}

/** Serialised and signed before the clock starts. */
export function signedEvents(kind: EventKind, prefix: string, count: number): PreparedEvent[] {
  return prepareEvents(count, BENCH_SECRET, (i) => event(kind, prefix, i));
}

/** Rows for a backlog stored straight into the events table. */
export function waitingEvents(kind: EventKind, prefix: string, count: number): WaitingEvent[] {
  return Array.from({ length: count }, (_, i) => {
    const e = event(kind, prefix, i);
    return { id: e.id, type: e.type, resourceKey: `task:${e.data.task.id}`, payload: JSON.stringify(e) };
  });
}
