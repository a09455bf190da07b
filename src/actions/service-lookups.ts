/**
 * The service lookups behind the `project`, `user` and `tasks` facts. A failed
 * lookup throws LookupError, which the event processor treats as "try the event
 * again later" rather than "the rule did not match".
 */
import type { Lookups } from '../rules/facts.js';
import { ServiceClient } from './service-client.js';
import { buildRequest, type ServiceRequest } from './service-operations.js';

export class LookupError extends Error {
  readonly code = 'lookup_failed';
}

function listOf(body: unknown): unknown[] {
  if (Array.isArray(body)) return body;
  const data = (body as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? data : [];
}

export class ServiceLookups implements Lookups {
  /** Set when any lookup failed: the evaluation that used it is not trustworthy. */
  failed: LookupError | undefined;

  constructor(private readonly client: ServiceClient) {}

  private async fetch(request: ServiceRequest): Promise<unknown> {
    // Without a key every lookup would be refused: say so once, and do not retry the event for it.
    if (!this.client.hasKey) throw new LookupError('lookups need SERVICE_API_KEY, which is not set');
    const outcome = await this.client.send(request);
    if (outcome.ok) return outcome.body;
    if (outcome.kind === 'http' && outcome.status === 404) return null;
    this.failed = new LookupError(`${request.method} ${request.path} failed: ${outcome.code}: ${outcome.message}`);
    throw this.failed;
  }

  async project(id: string): Promise<unknown> {
    // The service lists projects but has no single-project read (SPEC section 3).
    const projects = listOf(await this.fetch(buildRequest('projects.list')));
    return projects.find((p) => String((p as { id?: unknown })?.id) === String(id)) ?? null;
  }

  async user(id: string): Promise<unknown> {
    return this.fetch(buildRequest('users.get', { id: String(id) }));
  }

  async tasks(projectId: string): Promise<unknown[]> {
    return listOf(await this.fetch(buildRequest('tasks.list', {}, undefined, { project_id: String(projectId) })));
  }
}
