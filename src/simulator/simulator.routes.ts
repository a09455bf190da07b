/**
 * The service's operations (SPEC section 3 mapping) as one table of routes over
 * the in-memory state. Handlers validate everything before they change anything
 * and throw `SimError` otherwise, so a rejected request never has a side effect.
 * They return the events to send; the caller sends them after answering.
 */
import { isObject } from '../json.js';
import { checkTaskFields, TASK_DEFAULTS, UNLISTED_EVENTS } from './simulator.fields.js';
import { SimError } from './simulator.http.js';
import type { Project, SimulatorState, Task, WorkflowRun } from './simulator.state.js';

export interface RouteContext {
  state: SimulatorState;
  params: string[];
  query: URLSearchParams;
  body: unknown;
  now: Date;
}

export interface PendingEvent {
  type: string;
  data: Record<string, unknown>;
}

export interface RouteResult {
  status: number;
  body: unknown;
  events?: PendingEvent[];
  /** A workflow run the caller completes after the configured delay. */
  startedRun?: WorkflowRun;
}

interface Route {
  method: string;
  pattern: RegExp;
  handle(ctx: RouteContext): RouteResult;
}

/** Fields a client may not set: the service owns them. */
const READ_ONLY = new Set(['id', 'created_at', 'updated_at']);
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;

function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined) return {};
  if (!isObject(body)) throw new SimError(400, 'validation_failed', 'body must be a JSON object');
  return body;
}

function writable(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([key]) => !READ_ONLY.has(key)));
}

function checkText(body: Record<string, unknown>, field: string, required: boolean): void {
  const value = body[field];
  if (value === undefined && !required) return;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new SimError(400, 'validation_failed', `${field} is required and must be a non-empty string`);
  }
}

function checkNullableText(body: Record<string, unknown>, field: string): void {
  const value = body[field];
  if (value !== undefined && value !== null && typeof value !== 'string') {
    throw new SimError(400, 'validation_failed', `${field} must be a string or null`);
  }
}

function found<T>(map: Map<string, T>, id: string, kind: string): T {
  const item = map.get(id);
  if (item === undefined) throw new SimError(404, 'not_found', `${kind} ${id} not found`);
  return item;
}

function checkProjectExists(ctx: RouteContext, body: Record<string, unknown>): void {
  const id = body.project_id;
  if (typeof id === 'string' && !ctx.state.projects.has(id)) {
    throw new SimError(400, 'validation_failed', `project_id ${id} does not exist`);
  }
}

/** `{field: {from, to}}` for every field the patch really changes. */
export function diff(before: Record<string, unknown>, patch: Record<string, unknown>) {
  const changes: Record<string, { from: unknown; to: unknown }> = {};
  for (const [field, to] of Object.entries(patch)) {
    const from = before[field] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[field] = { from, to };
  }
  return changes;
}

const list = <T>(items: Iterable<T>): RouteResult => ({ status: 200, body: { data: [...items] } });
const one = (item: unknown, status = 200): RouteResult => ({ status, body: item });
const copy = <T>(item: T): T => structuredClone(item);

function inviteUser(ctx: RouteContext): RouteResult {
  const body = writable(objectBody(ctx.body));
  checkText(body, 'email', true);
  checkText(body, 'role', false);
  const email = String(body.email).trim();
  body.email = email;
  if (!EMAIL.test(email)) throw new SimError(400, 'validation_failed', 'email is not an email address');
  const taken = [...ctx.state.users.values()].some((u) => u.email.toLowerCase() === email.toLowerCase());
  if (taken) throw new SimError(409, 'conflict', `a user with email ${email} already exists`);
  const id = ctx.state.nextId('usr');
  const at = ctx.now.toISOString();
  // `id` first so answers read naturally; the service's own fields win over the body's.
  const user = { id, email, name: null, role: 'member', ...body, status: 'invited' as const, created_at: at };
  ctx.state.users.set(id, user);
  return { ...one(user, 201), events: [{ type: 'user.invited', data: { user: copy(user) } }] };
}

function createProject(ctx: RouteContext): RouteResult {
  const body = writable(objectBody(ctx.body));
  checkText(body, 'name', true);
  checkNullableText(body, 'owner_id');
  const id = ctx.state.nextId('prj');
  const at = ctx.now.toISOString();
  const project = {
    id, name: String(body.name), description: null, status: 'active', owner_id: null, ...body,
    created_at: at, updated_at: at,
  };
  ctx.state.projects.set(id, project);
  return { ...one(project, 201), events: [{ type: 'project.created', data: { project: copy(project) } }] };
}

/** Applies a project patch; a status becoming `archived` is reported, like a task's becoming `completed`. */
function changeProject(project: Project, patch: Record<string, unknown>, now: Date): RouteResult {
  const changes = diff(project, patch);
  if (Object.keys(changes).length === 0) return one(project);
  Object.assign(project, patch, { updated_at: now.toISOString() });
  if (changes.status?.to !== 'archived') return one(project);
  // Its tasks are left as they are: closing them is for rules to decide.
  return { ...one(project), events: [{ type: UNLISTED_EVENTS.projectArchived, data: { project: copy(project), changes } }] };
}

function updateProject(ctx: RouteContext): RouteResult {
  const project = found(ctx.state.projects, ctx.params[0], 'project');
  const patch = writable(objectBody(ctx.body));
  checkText(patch, 'name', false);
  checkText(patch, 'status', false);
  checkNullableText(patch, 'owner_id');
  return changeProject(project, patch, ctx.now);
}

function archiveProject(ctx: RouteContext): RouteResult {
  return changeProject(found(ctx.state.projects, ctx.params[0], 'project'), { status: 'archived' }, ctx.now);
}

function createTask(ctx: RouteContext): RouteResult {
  const body = writable(objectBody(ctx.body));
  checkText(body, 'project_id', true);
  checkText(body, 'title', true);
  checkText(body, 'status', false);
  checkNullableText(body, 'assignee_id');
  checkTaskFields(body);
  checkProjectExists(ctx, body);
  const id = ctx.state.nextId('tsk');
  const at = ctx.now.toISOString();
  const task: Task = {
    id, project_id: String(body.project_id), title: String(body.title), status: 'open', assignee_id: null,
    ...TASK_DEFAULTS, ...body, created_at: at, updated_at: at,
  };
  ctx.state.tasks.set(id, task);
  return { ...one(task, 201), events: [{ type: 'task.created', data: { task: copy(task) } }] };
}

function updateTask(ctx: RouteContext): RouteResult {
  const task = found(ctx.state.tasks, ctx.params[0], 'task');
  const patch = writable(objectBody(ctx.body));
  checkText(patch, 'project_id', false);
  checkText(patch, 'title', false);
  checkText(patch, 'status', false);
  checkNullableText(patch, 'assignee_id');
  checkTaskFields(patch);
  checkProjectExists(ctx, patch);
  const changes = diff(task, patch);
  // A patch that changes nothing is not an update: no event, so rules that set a
  // value the task already has cannot loop through the engine.
  if (Object.keys(changes).length === 0) return one(task);
  Object.assign(task, patch, { updated_at: ctx.now.toISOString() });
  const data = { task: copy(task), changes };
  const events: PendingEvent[] = [{ type: 'task.updated', data }];
  if (changes.status?.to === 'completed') events.push({ type: 'task.completed', data: copy(data) });
  return { ...one(task), events };
}

function deleteFrom<T>(map: Map<string, T>, kind: string) {
  return (ctx: RouteContext): RouteResult => {
    found(map, ctx.params[0], kind);
    map.delete(ctx.params[0]);
    return one({ id: ctx.params[0], deleted: true });
  };
}

function deleteTask(ctx: RouteContext): RouteResult {
  const task = found(ctx.state.tasks, ctx.params[0], 'task');
  const result = deleteFrom(ctx.state.tasks, 'task')(ctx);
  return { ...result, events: [{ type: UNLISTED_EVENTS.taskDeleted, data: { task: copy(task) } }] };
}

function triggerWorkflow(ctx: RouteContext): RouteResult {
  const workflow = found(ctx.state.workflows, ctx.params[0], 'workflow');
  const input = ctx.body === undefined ? {} : ctx.body;
  const run: WorkflowRun = {
    id: ctx.state.nextId('run'),
    workflow_id: workflow.id,
    status: 'running',
    input,
    created_at: ctx.now.toISOString(),
    completed_at: null,
  };
  ctx.state.workflowRuns.set(run.id, run);
  return { ...one(copy(run), 202), startedRun: run };
}

const ID = '([^/]+)';
const path = (p: string): RegExp => new RegExp(`^/v1${p.replace('{id}', ID)}/?$`);

const ROUTES: Route[] = [
  { method: 'GET', pattern: path('/users'), handle: (c) => list(c.state.users.values()) },
  { method: 'GET', pattern: path('/users/{id}'), handle: (c) => one(found(c.state.users, c.params[0], 'user')) },
  { method: 'POST', pattern: path('/users'), handle: inviteUser },
  { method: 'DELETE', pattern: path('/users/{id}'), handle: (c) => deleteFrom(c.state.users, 'user')(c) },
  { method: 'GET', pattern: path('/projects'), handle: (c) => list(c.state.projects.values()) },
  {
    method: 'GET', pattern: path('/projects/{id}'),
    handle: (c) => one(found(c.state.projects, c.params[0], 'project')),
  },
  { method: 'POST', pattern: path('/projects'), handle: createProject },
  { method: 'PATCH', pattern: path('/projects/{id}'), handle: updateProject },
  { method: 'DELETE', pattern: path('/projects/{id}'), handle: archiveProject },
  {
    method: 'GET', pattern: path('/tasks'),
    handle: (c) => {
      const projectId = c.query.get('project_id');
      const tasks = [...c.state.tasks.values()];
      return list(projectId === null ? tasks : tasks.filter((t) => t.project_id === projectId));
    },
  },
  { method: 'GET', pattern: path('/tasks/{id}'), handle: (c) => one(found(c.state.tasks, c.params[0], 'task')) },
  { method: 'POST', pattern: path('/tasks'), handle: createTask },
  { method: 'PATCH', pattern: path('/tasks/{id}'), handle: updateTask },
  { method: 'DELETE', pattern: path('/tasks/{id}'), handle: deleteTask },
  { method: 'GET', pattern: path('/workflows'), handle: (c) => list(c.state.workflows.values()) },
  {
    method: 'GET', pattern: path('/workflows/{id}'),
    handle: (c) => one(found(c.state.workflows, c.params[0], 'workflow')),
  },
  { method: 'POST', pattern: path('/workflows/{id}/trigger'), handle: triggerWorkflow },
];

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // a malformed escape is just an id that matches nothing
  }
}

export interface RouteMatch {
  handle(ctx: RouteContext): RouteResult;
  params: string[];
}

export function matchRoute(method: string, pathname: string): RouteMatch | undefined {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const m = route.pattern.exec(pathname);
    if (m) return { handle: route.handle, params: m.slice(1).map(safeDecode) };
  }
  return undefined;
}
