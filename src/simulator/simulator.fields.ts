/**
 * What the simulator adds to the service's interface for the rules of SPEC
 * section 11, where that interface is silent (SPEC section 3): two task fields
 * and the events of two changes the service lists no event for.
 *
 * - `due_date` (an ISO date, `2026-11-30`, or null) and `priority` (`low`,
 *   `normal`, `high` or `urgent`; `normal` when not given), checked on create
 *   and update. A date without a time compares as text in the right order, so
 *   a rule can test `t.due_date < now.date`.
 * - Events: the service's list has `task.completed` for a task whose status
 *   becomes `completed`, and nothing for a project being archived or a task
 *   being deleted. The simulator reports those two the same way, under the
 *   names below, so that a rule can start from them; if the real service names
 *   them otherwise, this table is the one place to correct.
 */
import { SimError } from './simulator.http.js';

export const TASK_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type TaskPriority = (typeof TASK_PRIORITIES)[number];

/** The fields a task gets when the request does not set them. */
export const TASK_DEFAULTS: { due_date: string | null; priority: TaskPriority } = { due_date: null, priority: 'normal' };

/** Events of changes the service's interface names no event for. */
export const UNLISTED_EVENTS = {
  /** A project's status became `archived` (DELETE /v1/projects/{id}, or a PATCH setting it). */
  projectArchived: 'project.archived',
  /** A task was deleted; `data.task` is the task as it was. */
  taskDeleted: 'task.deleted',
} as const;

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** `YYYY-MM-DD` naming a day that exists (no 2026-02-30). */
export function isIsoDate(value: string): boolean {
  const m = ISO_DATE.exec(value);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function invalid(message: string): SimError {
  return new SimError(400, 'validation_failed', message);
}

/** Checks `due_date` and `priority` when the body has them; throws before anything changes. */
export function checkTaskFields(body: Record<string, unknown>): void {
  const due = body.due_date;
  if (due !== undefined && due !== null && (typeof due !== 'string' || !isIsoDate(due))) {
    throw invalid(`due_date must be an ISO date such as 2026-11-30, or null (got ${JSON.stringify(due)})`);
  }
  const priority = body.priority;
  if (priority !== undefined && !(TASK_PRIORITIES as readonly unknown[]).includes(priority)) {
    throw invalid(`priority must be one of ${TASK_PRIORITIES.join(', ')} (got ${JSON.stringify(priority)})`);
  }
}
