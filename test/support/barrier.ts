/**
 * Rows for tests of the causal barrier: webhooks about resources the engine
 * has never seen, and creating action runs in flight, written as the engine
 * writes them (intake's writer; a handed-off first run).
 */
import { randomUUID } from 'node:crypto';
import { scopeOfEvent, type CausalScope } from '../../src/causal-scope.js';
import type { Clock } from '../../src/clock.js';
import { ActionRunEntity } from '../../src/database/action-run.entity.js';
import type { Database } from '../../src/database/database.service.js';
import type { EventWriter } from '../../src/intake/event-writer.js';

/** A webhook about `resource` (`task:<id>`, with `fields` in `data.task`). */
export async function writeUnseen(writer: EventWriter, eventId: string, resource: string, fields: Record<string, unknown> = {}): Promise<void> {
  const [kind, id] = resource.split(':') as [string, string];
  const data = { [kind]: { id, ...fields } };
  await writer.write({
    eventId, type: `${kind}.created`, resourceKey: resource, scope: scopeOfEvent(resource, data),
    source: 'webhook', payload: JSON.stringify({ id: eventId, type: `${kind}.created`, data }),
  });
}

/** A creating run in flight: `running` under a lease of `leaseMs` from now, its scope recorded. */
export async function writeCreatingRun(db: Database, clock: Clock, scope: CausalScope, leaseMs: number, type = 'task.create'): Promise<string> {
  const id = randomUUID();
  const now = clock.now().toISOString();
  await db.write((m) =>
    m.insert(ActionRunEntity, {
      id, executionId: randomUUID(), eventSeq: 0, resourceKey: null, ruleId: 'r', position: 0, actionId: null, type,
      status: 'running', attempts: 1, nextAttemptAt: now, createdAt: now, updatedAt: now, leaseOwner: 'someone',
      leaseUntil: new Date(clock.now().getTime() + leaseMs).toISOString(), scopeKind: scope.kind, scopeParent: scope.parent,
    }),
  );
  return id;
}
