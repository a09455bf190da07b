/**
 * Action types → service requests (SPEC section 5). A registry over one
 * interface: adding an action type is one entry here.
 */
import type { ActionType } from '../rules/rule.types.js';
import { buildRequest, type OperationName, type ServiceRequest } from './service-operations.js';

export class ActionParamsError extends Error {
  readonly code = 'invalid_params';
}

export type ResourceKind = 'task' | 'user' | 'project' | 'workflow_run';

/** Action types that make a new resource, whose id the engine learns only from the answer. */
export const CREATING_ACTIONS: readonly ActionType[] = ['task.create', 'user.invite', 'project.create', 'workflow.trigger'];

export interface ActionHandler {
  /** The kind of resource the action creates or changes (loop protection tracks it). */
  kind: ResourceKind;
  /** Builds the request from rendered params; throws ActionParamsError when a required one is missing. */
  toRequest(params: Record<string, unknown>): ServiceRequest;
}

/** `<kind>:<id>` of the resource a performed action created or changed, when it can be told. */
export function touchedResource(type: ActionType, request: ServiceRequest, response: unknown): string | null {
  const kind = ACTION_HANDLERS[type].kind;
  const created = (response as { id?: unknown } | null)?.id;
  const id = request.targetId ?? (typeof created === 'string' || typeof created === 'number' ? String(created) : undefined);
  return id === undefined ? null : `${kind}:${id}`;
}

function requireId(params: Record<string, unknown>, type: string): string {
  const id = params.id;
  if ((typeof id !== 'string' || id === '') && typeof id !== 'number') {
    throw new ActionParamsError(`${type} needs params.id (a string), got ${JSON.stringify(id) ?? 'nothing'}`);
  }
  return String(id);
}

function withoutId(params: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, ...rest } = params;
  return rest;
}

/** POST a body; `required` names params that must be present. */
const create = (operation: OperationName, type: string, kind: ResourceKind, required: string[]): ActionHandler => ({
  kind,
  toRequest(params) {
    for (const name of required) {
      if (params[name] === undefined || params[name] === null || params[name] === '') {
        throw new ActionParamsError(`${type} needs params.${name}`);
      }
    }
    return buildRequest(operation, {}, params);
  },
});
/** PATCH the resource named by params.id with the other params. */
const update = (operation: OperationName, type: string, kind: ResourceKind): ActionHandler => ({
  kind,
  toRequest: (params) => targeting(buildRequest(operation, { id: requireId(params, type) }, withoutId(params)), params, type),
});
/** DELETE the resource named by params.id. */
const remove = (operation: OperationName, type: string, kind: ResourceKind): ActionHandler => ({
  kind,
  toRequest: (params) => targeting(buildRequest(operation, { id: requireId(params, type) }), params, type),
});

function targeting(request: ServiceRequest, params: Record<string, unknown>, type: string): ServiceRequest {
  return { ...request, targetId: requireId(params, type) };
}

export const ACTION_HANDLERS: Record<ActionType, ActionHandler> = {
  'task.create': create('tasks.create', 'task.create', 'task', ['project_id']),
  'task.update': update('tasks.update', 'task.update', 'task'),
  'task.delete': remove('tasks.delete', 'task.delete', 'task'),
  'user.invite': create('users.invite', 'user.invite', 'user', []),
  'user.remove': remove('users.remove', 'user.remove', 'user'),
  'project.create': create('projects.create', 'project.create', 'project', []),
  'project.update': update('projects.update', 'project.update', 'project'),
  'project.archive': remove('projects.archive', 'project.archive', 'project'),
  'workflow.trigger': {
    kind: 'workflow_run',
    toRequest: (params) =>
      buildRequest('workflows.trigger', { id: requireId(params, 'workflow.trigger') }, params.input ?? {}),
  },
};
