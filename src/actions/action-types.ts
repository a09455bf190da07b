/**
 * Action types → service requests (SPEC section 5). A registry over one
 * interface: adding an action type is one entry here.
 */
import type { ActionType } from '../rules/rule.types.js';
import { buildRequest, type OperationName, type ServiceRequest } from './service-operations.js';

export class ActionParamsError extends Error {
  readonly code = 'invalid_params';
}

export interface ActionHandler {
  /** Builds the request from rendered params; throws ActionParamsError when a required one is missing. */
  toRequest(params: Record<string, unknown>): ServiceRequest;
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
const create = (operation: OperationName, type: string, required: string[]): ActionHandler => ({
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
const update = (operation: OperationName, type: string): ActionHandler => ({
  toRequest: (params) => buildRequest(operation, { id: requireId(params, type) }, withoutId(params)),
});
/** DELETE the resource named by params.id. */
const remove = (operation: OperationName, type: string): ActionHandler => ({
  toRequest: (params) => buildRequest(operation, { id: requireId(params, type) }),
});

export const ACTION_HANDLERS: Record<ActionType, ActionHandler> = {
  'task.create': create('tasks.create', 'task.create', ['project_id']),
  'task.update': update('tasks.update', 'task.update'),
  'task.delete': remove('tasks.delete', 'task.delete'),
  'user.invite': create('users.invite', 'user.invite', []),
  'user.remove': remove('users.remove', 'user.remove'),
  'project.create': create('projects.create', 'project.create', []),
  'project.update': update('projects.update', 'project.update'),
  'project.archive': remove('projects.archive', 'project.archive'),
  'workflow.trigger': {
    toRequest: (params) =>
      buildRequest('workflows.trigger', { id: requireId(params, 'workflow.trigger') }, params.input ?? {}),
  },
};
