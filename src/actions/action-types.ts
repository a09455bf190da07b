/**
 * Action types → service requests (SPEC section 5). A registry over one
 * interface: adding an action type is one entry in ACTION_HANDLERS (and its
 * name in the rule schema's enum, which a test holds against this registry).
 */
import { scopeOf } from '../causal-scope.js';
import { buildRequest, type OperationName, type ServiceRequest } from './service-operations.js';

export class ActionParamsError extends Error {
  readonly code = 'invalid_params';
}

export type ResourceKind = 'task' | 'user' | 'project' | 'workflow_run';

export interface ActionHandler {
  /** The kind of resource the action creates or changes (loop protection tracks it). */
  kind: ResourceKind;
  /** It makes a new resource, whose id the engine learns only from the answer (the causal barrier waits for those). */
  creates: boolean;
  /** Params that must be present after rendering (the rule schema requires the same). */
  required: readonly string[];
  /** Builds the request from rendered params; throws ActionParamsError when a required one is missing. */
  toRequest(params: Record<string, unknown>): ServiceRequest;
}

/** `<kind>:<id>` of the resource a performed action created or changed, when it can be told. */
export function touchedResource(type: string, request: ServiceRequest, response: unknown): string | null {
  const kind = handlerFor(type).kind;
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
  creates: true,
  required,
  toRequest(params) {
    for (const name of required) {
      if (params[name] === undefined || params[name] === null || params[name] === '') {
        throw new ActionParamsError(`${type} needs params.${name}`);
      }
    }
    return { ...buildRequest(operation, {}, params), createsIn: scopeOf(kind, params) };
  },
});
/** PATCH the resource named by params.id with the other params. */
const update = (operation: OperationName, type: string, kind: ResourceKind): ActionHandler => ({
  kind,
  creates: false,
  required: ['id'],
  toRequest: (params) => targeting(buildRequest(operation, { id: requireId(params, type) }, withoutId(params)), params, type),
});
/** DELETE the resource named by params.id. */
const remove = (operation: OperationName, type: string, kind: ResourceKind): ActionHandler => ({
  kind,
  creates: false,
  required: ['id'],
  toRequest: (params) => targeting(buildRequest(operation, { id: requireId(params, type) }), params, type),
});

function targeting(request: ServiceRequest, params: Record<string, unknown>, type: string): ServiceRequest {
  return { ...request, targetId: requireId(params, type) };
}

export const ACTION_HANDLERS = {
  'task.create': create('tasks.create', 'task.create', 'task', ['project_id']),
  'task.update': update('tasks.update', 'task.update', 'task'),
  'task.delete': remove('tasks.delete', 'task.delete', 'task'),
  'user.invite': create('users.invite', 'user.invite', 'user', ['email']),
  'user.remove': remove('users.remove', 'user.remove', 'user'),
  'project.create': create('projects.create', 'project.create', 'project', []),
  'project.update': update('projects.update', 'project.update', 'project'),
  'project.archive': remove('projects.archive', 'project.archive', 'project'),
  'workflow.trigger': {
    kind: 'workflow_run',
    // A workflow run is new with every trigger, and its id comes only with the answer.
    creates: true,
    required: ['id'],
    toRequest: (params) => {
      const id = requireId(params, 'workflow.trigger');
      return { ...buildRequest('workflows.trigger', { id }, params.input ?? {}), createsIn: scopeOf('workflow_run', { workflow_id: id }) };
    },
  },
} as const satisfies Record<string, ActionHandler>;

export type ActionType = keyof typeof ACTION_HANDLERS;

export const ACTION_TYPES = Object.keys(ACTION_HANDLERS) as ActionType[];

/** Action types that make a new resource, whose id the engine learns only from the answer. */
export const CREATING_ACTIONS: readonly ActionType[] = ACTION_TYPES.filter((type) => ACTION_HANDLERS[type].creates);

export function isActionType(type: string): type is ActionType {
  return Object.hasOwn(ACTION_HANDLERS, type);
}

/** The handler of a validated rule's action type. */
export function handlerFor(type: string): ActionHandler {
  if (!isActionType(type)) throw new ActionParamsError(`unknown action type ${JSON.stringify(type)}`);
  return ACTION_HANDLERS[type];
}
