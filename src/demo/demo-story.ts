/**
 * The demo's short story, played against a running simulator and engine: a
 * task is completed in the service, an event file is sent as the service would
 * send it, a project is created in the service. After each step the demo waits
 * until the engine has settled every event the step caused (including the
 * webhooks the service sent back because of the engine's own actions), then
 * checks at the simulator that the expected change really happened.
 */
import { join } from 'node:path';
import type { SignatureScheme } from '../intake/signature.js';
import type { Simulator, WebhookLogEntry } from '../simulator/simulator.js';
import type { AdminEvent, StepRecord, Trigger } from './demo-report.js';
import { postSignedEvent, readEventFile } from '../cli/send-event.js';
import { waitUntil } from '../wait.js';

export interface DemoWorld {
  sim: Simulator;
  /** http://127.0.0.1:PORT, without a trailing slash. */
  engineUrl: string;
  adminToken: string;
  secret: string;
  scheme: SignatureScheme;
  /** The key the demo uses at the simulator, as a person using the service would. */
  apiKey: string;
  examplesDir: string;
}

/** What a step did: how (for the report) and the events the engine received as a direct result. */
export interface Acted {
  how: string;
  triggers: Trigger[];
  /** The engine had the event already (200 duplicate), so nothing new happens. */
  duplicate?: boolean;
}

export interface StoryStep {
  title: string;
  act(world: DemoWorld): Promise<Acted>;
  /** The changes the step should have caused at the service, each checked there. */
  check(world: DemoWorld, acted: Acted, events: ReadonlyMap<string, AdminEvent>): StepRecord['checks'];
}

const FINAL_RUN_STATES = new Set(['succeeded', 'failed', 'skipped']);
const POLL_MS = 50;

/** Processed, and every execution and action run of it finished (retries would still be pending). */
export function isSettled(event: AdminEvent): boolean {
  return (
    event.status !== 'received' &&
    event.executions.every((x) => x.status !== 'running' && x.actions.every((a) => FINAL_RUN_STATES.has(a.status)))
  );
}

async function adminEvent(world: DemoWorld, id: string): Promise<AdminEvent | undefined> {
  const res = await fetch(`${world.engineUrl}/admin/events/${encodeURIComponent(id)}`, {
    headers: { Authorization: `Bearer ${world.adminToken}` },
  });
  if (res.status === 404) return undefined;
  if (!res.ok) throw new Error(`GET /admin/events/${id} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as AdminEvent;
}

/** A /v1 request at the simulator, made as a person using the service would make it. */
async function serviceRequest(world: DemoWorld, method: string, path: string, body?: unknown) {
  const res = await fetch(`${world.sim.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${world.apiKey}`, 'Content-Type': 'application/json', Accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  return { status: res.status, answer, how: `${method} /v1${path}${body === undefined ? '' : ` ${JSON.stringify(body)}`} at the service → ${res.status}` };
}

/** The webhooks a change at the simulator produced; it logs them as its answer goes out, so they are normally there already. */
async function webhooksSince(world: DemoWorld, before: number): Promise<Trigger[]> {
  const appeared = () => world.sim.webhooks.length > before;
  // None after a second is an answer too: the step then reports that nothing was sent.
  await waitUntil(appeared, { timeoutMs: 1_000, intervalMs: POLL_MS, what: 'a webhook' }).catch(() => undefined);
  return world.sim.webhooks.slice(before).map((w) => ({ eventId: w.event.id, type: w.event.type }));
}

const taskTitled = (world: DemoWorld, title: string) => [...world.sim.state.tasks.values()].find((t) => t.title === title);

const wasThrottled = (events: ReadonlyMap<string, AdminEvent>, rule: string) =>
  [...events.values()].some((e) => e.rules.some((r) => r.rule === rule && r.outcome === 'throttled'));

export const STORY: StoryStep[] = [
  {
    title: 'A release task is completed in the service',
    async act(world) {
      const before = world.sim.webhooks.length;
      const { how } = await serviceRequest(world, 'PATCH', '/tasks/tsk_2', { status: 'completed' });
      return { how, triggers: await webhooksSince(world, before) };
    },
    check(world, _acted, events) {
      const review = taskTitled(world, 'Review: Release 1.0');
      const notes = taskTitled(world, 'Release notes for Release 1.0');
      const run = [...world.sim.state.workflowRuns.values()].find((r) => r.workflow_id === 'wf_notify');
      const checks = [
        { ok: review !== undefined, text: `the service has the follow-up task "Review: Release 1.0"${review ? ` (${review.id})` : ''}` },
      ];
      if (wasThrottled(events, 'notify-on-release-completion')) {
        // Its throttle allows one run per task and hour, counted in the database: a kept DATABASE_URL remembers the last demo.
        return [...checks, { ok: true, text: 'notify-on-release-completion was throttled: it ran for tsk_2 within the last hour' }];
      }
      return [
        ...checks,
        { ok: notes !== undefined, text: `the service has the task "Release notes for Release 1.0"${notes ? ` (${notes.id})` : ''}` },
        { ok: run !== undefined, text: `workflow wf_notify was triggered${run ? ` (${run.id}, ${run.status})` : ''}` },
      ];
    },
  },
  {
    title: 'An event file is sent, signed as the service signs it',
    async act(world) {
      const file = join(world.examplesDir, 'task-blocked.json');
      const { raw, event } = await readEventFile(file);
      const answer = await postSignedEvent(`${world.engineUrl}/webhooks`, raw, world.secret, world.scheme);
      const { id, type } = event as { id: string; type: string };
      const how = `examples/events/task-blocked.json posted to /webhooks, signed (as npm run send-event does) → ${answer.status} ${answer.body}`;
      const duplicate = answer.status === 200 && answer.body.includes('"duplicate"');
      return { how, triggers: answer.status < 300 ? [{ eventId: id, type }] : [], duplicate };
    },
    check(world, acted) {
      const task = world.sim.state.tasks.get('tsk_3');
      return [
        acted.duplicate
          ? { ok: true, text: 'the engine had seen this event before (DATABASE_URL keeps events between runs), so it did nothing' }
          : { ok: task?.priority === 'high', text: `task tsk_3 has priority "high" at the service (it is ${JSON.stringify(task?.priority ?? null)})` },
      ];
    },
  },
  {
    title: 'A project with an owner email is created in the service',
    async act(world) {
      const before = world.sim.webhooks.length;
      const body = { name: 'Analytics', owner_email: 'katherine@example.com' };
      const { how } = await serviceRequest(world, 'POST', '/projects', body);
      return { how, triggers: await webhooksSince(world, before) };
    },
    check(world) {
      const user = [...world.sim.state.users.values()].find((u) => u.email === 'katherine@example.com');
      return [{ ok: user !== undefined, text: `katherine@example.com was invited to the service${user ? ` (${user.id}, ${user.status})` : ''}` }];
    },
  },
];

/** The events a step caused: its triggers and every webhook delivered since, less those lost for good. */
function eventIdsOf(sent: readonly WebhookLogEntry[], triggers: readonly Trigger[]): string[] {
  const delivered = sent.filter((w) => w.state === 'delivered').map((w) => w.event.id);
  // A delivery that failed for good never reaches the engine; the report says so.
  const lost = new Set(sent.filter((w) => w.state === 'failed' || w.state === 'skipped').map((w) => w.event.id));
  return [...new Set([...triggers.map((t) => t.eventId), ...delivered])].filter((id) => !lost.has(id));
}

/**
 * Waits until every event of the step is settled at the engine, the simulator
 * has nothing left to send (workflow runs finish on a timer) and no new
 * webhook appeared meanwhile. Returns what it saw, and a problem on timeout.
 */
export async function settle(
  world: DemoWorld,
  since: number,
  triggers: readonly Trigger[],
  timeoutMs: number,
): Promise<{ events: Map<string, AdminEvent>; webhooks: WebhookLogEntry[]; problem?: string }> {
  const events = new Map<string, AdminEvent>();
  const settled = new Set<string>();
  let open: string[] = [];
  const isDone = async (): Promise<boolean> => {
    const seen = world.sim.webhooks.length;
    // waitForIdle(0) answers at once: resolved when idle, rejected when not.
    const simIdle = world.sim.waitForIdle(0).then(() => true, () => false);
    const sent = world.sim.webhooks.slice(since);
    const ids = eventIdsOf(sent, triggers);
    for (const id of ids.filter((i) => !settled.has(i))) {
      const event = await adminEvent(world, id);
      if (event !== undefined) events.set(id, event);
      if (event !== undefined && isSettled(event)) settled.add(id);
    }
    open = ids.filter((id) => !settled.has(id));
    return open.length === 0 && !sent.some((w) => w.state === 'pending') && (await simIdle) && world.sim.webhooks.length === seen;
  };
  try {
    await waitUntil(isDone, { timeoutMs, intervalMs: POLL_MS, what: 'the step to settle' });
    return { events, webhooks: world.sim.webhooks.slice(since) };
  } catch (error) {
    const what = open.length > 0 ? `events still in progress: ${open.join(', ')}` : 'the simulator to finish';
    const cause = (error as Error).cause;
    const why = cause === undefined ? '' : ` (last error: ${cause instanceof Error ? cause.message : String(cause)})`;
    return { events, webhooks: world.sim.webhooks.slice(since), problem: `timed out after ${timeoutMs} ms waiting for ${what}${why}` };
  }
}

/** Plays one step and records everything the report needs. */
export async function playStep(world: DemoWorld, step: StoryStep, timeoutMs = 20_000): Promise<StepRecord> {
  const since = world.sim.webhooks.length;
  const acted = await step.act(world);
  const { events, webhooks, problem } = await settle(world, since, acted.triggers, timeoutMs);
  const checks = step.check(world, acted, events);
  if (problem) checks.unshift({ ok: false, text: problem });
  return { title: step.title, how: acted.how, triggers: acted.triggers, events, webhooks, checks };
}
