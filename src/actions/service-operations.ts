/**
 * The service's operations and the requests they make (SPEC section 3). The
 * service's own interface gives paths and purposes only; this table is the one
 * place the engine's assumptions about methods live, so correcting one line
 * corrects the engine.
 */
import type { CausalScope } from '../causal-scope.js';

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export const OPERATIONS = {
  'users.list': { method: 'GET', path: '/users' },
  'users.get': { method: 'GET', path: '/users/{id}' },
  'users.invite': { method: 'POST', path: '/users' },
  'users.remove': { method: 'DELETE', path: '/users/{id}' },
  'projects.list': { method: 'GET', path: '/projects' },
  'projects.create': { method: 'POST', path: '/projects' },
  'projects.update': { method: 'PATCH', path: '/projects/{id}' },
  'projects.archive': { method: 'DELETE', path: '/projects/{id}' },
  'tasks.list': { method: 'GET', path: '/tasks' },
  'tasks.create': { method: 'POST', path: '/tasks' },
  'tasks.update': { method: 'PATCH', path: '/tasks/{id}' },
  'tasks.delete': { method: 'DELETE', path: '/tasks/{id}' },
  'workflows.list': { method: 'GET', path: '/workflows' },
  'workflows.trigger': { method: 'POST', path: '/workflows/{id}/trigger' },
} as const satisfies Record<string, { method: HttpMethod; path: string }>;

export type OperationName = keyof typeof OPERATIONS;

/** A request ready to send: `path` is relative to the `/v1` base. */
export interface ServiceRequest {
  operation: OperationName;
  method: HttpMethod;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  /** The id of the existing resource the request changes, when it names one. */
  targetId?: string;
  /** For a request that creates a resource: what it could create (the causal barrier's scope, causal-scope.ts). */
  createsIn?: CausalScope;
}

export function buildRequest(
  operation: OperationName,
  pathParams: Record<string, string> = {},
  body?: unknown,
  query?: Record<string, string>,
): ServiceRequest {
  const { method, path } = OPERATIONS[operation];
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(pathParams[name] ?? ''));
  const request: ServiceRequest = { operation, method, path: filled };
  if (query) request.query = query;
  if (body !== undefined && method !== 'GET' && method !== 'DELETE') request.body = body;
  return request;
}
