/**
 * What a creating action could have caused, and what an event could have been
 * caused by, in the same terms (SPEC 6, "Loop protection"; README, Guarantees).
 *
 * An action that creates a resource learns its id only from the service's
 * answer, and the service's webhook about it may come first. Until the answer
 * is recorded, an event about a resource the engine has not seen might be the
 * engine's own doing, so it waits (work-queue.ts, the causal barrier). It need
 * not wait for every creating action in flight: a task created in project A
 * cannot be a task of project B, an invitation names its e-mail address before
 * the call, and a project create cannot produce a task. A scope is the kind of
 * resource and, where the request names one, the parent that tells resources
 * of that kind apart before they have an id. An event waits only for in-flight
 * creating actions of the same kind whose parent is the same, or unknown on
 * either side.
 */
import { isObject } from './json.js';

export interface CausalScope {
  /** The resource kind, as in `resource_key` (`task`, `user`, `project`, `workflow_run`). */
  kind: string;
  /** `<name>:<value>` of the field that tells them apart (`project:prj_1`); null when unknown or none. */
  parent: string | null;
}

/** Per kind, the field of the resource (and of the request that creates it) that names its parent. */
const PARENT_FIELDS: Readonly<Record<string, { field: string; name: string; fold?: boolean }>> = {
  task: { field: 'project_id', name: 'project' },
  user: { field: 'email', name: 'email', fold: true },
  workflow_run: { field: 'workflow_id', name: 'workflow' },
};

/** Longest parent value kept; longer ones are cut (a shared prefix only makes two scopes one, which waits more, never less). */
const MAX_PARENT = 250;

/** The scope of a resource of `kind` with these fields (a webhook's `data.<kind>`, or a create request's body). */
export function scopeOf(kind: string, fields: unknown): CausalScope {
  const parent = PARENT_FIELDS[kind];
  const value = parent && isObject(fields) ? fields[parent.field] : undefined;
  if (parent === undefined || (typeof value !== 'string' && typeof value !== 'number') || value === '') return { kind, parent: null };
  const text = parent.fold ? String(value).trim().toLowerCase() : String(value);
  return { kind, parent: `${parent.name}:${text}`.slice(0, MAX_PARENT) };
}

/** The scope of an event about `resourceKey` (`<kind>:<id>`), read from `data.<kind>`; null when it is about no resource. */
export function scopeOfEvent(resourceKey: string | null, data: unknown): CausalScope | null {
  if (resourceKey === null) return null;
  const kind = resourceKey.slice(0, resourceKey.indexOf(':'));
  return scopeOf(kind, isObject(data) ? data[kind] : undefined);
}

/** Whether an event in `event` could have been caused by an action creating in `action` (the claim's SQL says the same). */
export function inScope(event: CausalScope, action: CausalScope): boolean {
  return event.kind === action.kind && (event.parent === null || action.parent === null || event.parent === action.parent);
}
