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
import type { ClaimedActionRun } from '../../src/processing/work.js';
import { taskEvent, type Core } from './core.js';

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

/**
 * A create in flight in project prj_1, as the engine makes one: a `task.completed` event processed under a rule that
 * creates a task there (the caller's), its run claimed and given its scope as a run that sends it has it; the clock
 * then moves on, so that new tasks of prj_1 stored next are held behind it.
 */
export async function aCreateInFlight(core: Core): Promise<ClaimedActionRun> {
  await core.store(taskEvent('task.completed', { title: 'Done' }));
  await core.processNext();
  const [create] = await core.queue.claimActionRuns(10, 60_000);
  await core.db.write((m) => m.update(ActionRunEntity, { id: create!.id }, { scopeKind: 'task', scopeParent: 'project:prj_1' }));
  core.clock.advance(1);
  return create!;
}
