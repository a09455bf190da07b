import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySignature, type SignatureScheme } from '../intake/signature.js';
import { startSimulator, type Simulator, type SimulatorOptions } from './simulator.js';

/** Parsed JSON of an answer; `any` keeps the assertions short. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (res: Response): Promise<any> => res.json();

const SECRET = 'whsec_spec';

interface Received {
  headers: IncomingHttpHeaders;
  raw: Buffer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  event: any;
}

/** A tiny webhook receiver: keeps what arrives, answers the given statuses in turn, then 200. */
async function startReceiver(statuses: number[] = []) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      received.push({ headers: req.headers, raw, event: JSON.parse(raw.toString('utf8')) });
      res.writeHead(statuses.shift() ?? 200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return { url, received, close };
}

async function call(sim: Simulator, method: string, path: string, body?: unknown) {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { Authorization: 'Bearer ac_test_hooks', 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await json(res) };
}

function verify(r: Received, scheme: SignatureScheme, secrets = [SECRET]) {
  const header = r.headers['x-service-signature'] as string | undefined;
  return verifySignature(r.raw, header, { scheme, secrets, toleranceSeconds: 300, now: new Date() });
}

describe(startSimulator.name, () => {
  let sim: Simulator;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const start = async (options: SimulatorOptions = {}, statuses: number[] = []) => {
    receiver = await startReceiver(statuses);
    sim = await startSimulator({
      webhookUrl: receiver.url, webhookSecret: SECRET, workflowRunDelayMs: 20, webhookRetryDelaysMs: [10, 10], ...options,
    });
  };
  afterEach(async () => {
    await sim.close();
    await receiver.close();
  });

  describe('webhook signing', () => {
    it.each<SignatureScheme>(['hmac-sha256', 'timestamped'])('signs each delivery with %s over the raw body', async (scheme) => {
      await start({ signatureScheme: scheme });
      await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Signed' });
      await sim.waitForWebhooksIdle();
      expect(receiver.received).toHaveLength(1);
      expect(verify(receiver.received[0], scheme)).toEqual({ ok: true });
      expect(verify(receiver.received[0], scheme, ['another-secret']).ok).toBe(false);
    });
  });

  describe('event envelope', () => {
    it('sends {id, type, created_at, data} with the resource under its kind', async () => {
      await start();
      const created = await call(sim, 'POST', '/tasks', { project_id: 'prj_1', title: 'Envelope' });
      await sim.waitForWebhooksIdle();
      const event = receiver.received[0].event;
      expect(event).toEqual({
        id: expect.stringMatching(/^evt_\w+$/),
        type: 'task.created',
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        data: { task: created.body },
      });
      expect(sim.webhooks[0]).toMatchObject({ state: 'delivered', status: 200, attempts: 1 });
    });

    it('reports invitations and new projects', async () => {
      await start();
      await call(sim, 'POST', '/users', { email: 'new@example.com' });
      await call(sim, 'POST', '/projects', { name: 'New' });
      await sim.waitForWebhooksIdle();
      const events = receiver.received.map((r) => r.event);
      expect(events.map((e) => e.type)).toEqual(['user.invited', 'project.created']);
      expect(events[0].data.user.email).toBe('new@example.com');
      expect(events[1].data.project.name).toBe('New');
    });
  });

  describe('task updates', () => {
    it('sends task.updated with changes, then task.completed when the status becomes completed', async () => {
      await start();
      await call(sim, 'PATCH', '/tasks/tsk_1', { status: 'completed' });
      await sim.waitForWebhooksIdle();
      const [updated, completed] = receiver.received.map((r) => r.event);
      expect(updated.type).toBe('task.updated');
      expect(updated.data.changes).toEqual({ status: { from: 'open', to: 'completed' } });
      expect(completed.type).toBe('task.completed');
      expect(completed.data.task).toMatchObject({ id: 'tsk_1', status: 'completed' });
      expect(completed.id).not.toBe(updated.id);
    });

    it('sends only task.updated for another change, and nothing for a patch that changes nothing', async () => {
      await start();
      await call(sim, 'PATCH', '/tasks/tsk_1', { title: 'Renamed' });
      await call(sim, 'PATCH', '/tasks/tsk_1', { title: 'Renamed' });
      await sim.waitForWebhooksIdle();
      expect(receiver.received.map((r) => r.event.type)).toEqual(['task.updated']);
    });
  });

  describe('changes the service lists no event for', () => {
    it('sends project.archived with the status change when a project is archived, and nothing about its tasks', async () => {
      await start();
      await call(sim, 'DELETE', '/projects/prj_1');
      await call(sim, 'DELETE', '/projects/prj_1');
      await sim.waitForWebhooksIdle();
      const events = receiver.received.map((r) => r.event);
      expect(events.map((e) => e.type)).toEqual(['project.archived']);
      expect(events[0].data).toEqual({
        project: expect.objectContaining({ id: 'prj_1', status: 'archived' }),
        changes: { status: { from: 'active', to: 'archived' } },
      });
      expect(verify(receiver.received[0], 'hmac-sha256')).toEqual({ ok: true });
    });

    it('sends project.archived for a PATCH that sets the status to archived, and no event for other project edits', async () => {
      await start();
      await call(sim, 'PATCH', '/projects/prj_2', { name: 'Mobile app v2' });
      await call(sim, 'PATCH', '/projects/prj_2', { status: 'archived' });
      await sim.waitForWebhooksIdle();
      expect(receiver.received.map((r) => [r.event.type, r.event.data.project.id])).toEqual([['project.archived', 'prj_2']]);
    });

    it('sends task.deleted with the task as it was', async () => {
      await start();
      await call(sim, 'PATCH', '/tasks/tsk_1', { priority: 'high' });
      await call(sim, 'DELETE', '/tasks/tsk_1');
      await call(sim, 'DELETE', '/tasks/tsk_1');
      await sim.waitForWebhooksIdle();
      const events = receiver.received.map((r) => r.event);
      expect(events.map((e) => e.type)).toEqual(['task.updated', 'task.deleted']);
      expect(events[0].data.changes).toEqual({ priority: { from: 'normal', to: 'high' } });
      expect(events[1].data).toEqual({ task: expect.objectContaining({ id: 'tsk_1', project_id: 'prj_1', priority: 'high', due_date: null }) });
    });
  });

  describe('workflow runs', () => {
    it('sends workflow.run.completed after a trigger', async () => {
      await start();
      const run = await call(sim, 'POST', '/workflows/wf_notify/trigger', { task_id: 'tsk_1' });
      const delivered = await sim.waitForWebhook('workflow.run.completed');
      expect(delivered.event.data.workflow_run).toMatchObject({
        id: run.body.id, workflow_id: 'wf_notify', status: 'completed', input: { task_id: 'tsk_1' },
      });
      expect(receiver.received.map((r) => r.event.type)).toEqual(['workflow.run.completed']);
    });
  });

  describe('delivery retries', () => {
    it('retries after a 5xx and delivers the same event', async () => {
      await start({}, [503]);
      sim.emit('task.created', { task: { id: 'tsk_x' } });
      await sim.waitForWebhooksIdle();
      expect(receiver.received.map((r) => r.event.id)).toEqual([sim.webhooks[0].event.id, sim.webhooks[0].event.id]);
      expect(sim.webhooks[0]).toMatchObject({ state: 'delivered', attempts: 2, status: 200 });
    });

    it('does not retry a 4xx other than 408 and 429', async () => {
      await start({}, [401]);
      sim.emit('task.created', { task: { id: 'tsk_x' } });
      await sim.waitForWebhooksIdle();
      expect(sim.webhooks[0]).toMatchObject({ state: 'failed', attempts: 1, status: 401 });
    });

    it('gives up after the retries when the receiver is unreachable', async () => {
      await start();
      await receiver.close();
      sim.emit('task.created', { task: { id: 'tsk_x' } });
      await sim.waitForWebhooksIdle();
      expect(sim.webhooks[0]).toMatchObject({ state: 'failed', attempts: 3, error: expect.any(String) });
    });
  });

  describe('emitting on demand', () => {
    it('sends a signed event with a fresh id from POST /_sim/emit', async () => {
      await start();
      const body = JSON.stringify({ type: 'task.completed', data: { task: { id: 'tsk_1' } } });
      const first = await json(await fetch(`${sim.origin}/_sim/emit`, { method: 'POST', body }));
      const second = await json(await fetch(`${sim.origin}/_sim/emit`, { method: 'POST', body }));
      await sim.waitForWebhooksIdle();
      expect(first.id).not.toBe(second.id);
      expect(receiver.received.map((r) => r.event.id)).toEqual([first.id, second.id]);
      expect(verify(receiver.received[1], 'hmac-sha256')).toEqual({ ok: true });
      const log = await json(await fetch(`${sim.origin}/_sim/webhooks`));
      expect(log.data.map((e: { state: string }) => e.state)).toEqual(['delivered', 'delivered']);
    });

    it('records but sends nothing without a webhook URL', async () => {
      await start({ webhookUrl: undefined });
      sim.emit('project.created', { project: { id: 'prj_9' } });
      await sim.waitForIdle();
      expect(receiver.received).toHaveLength(0);
      expect(sim.webhooks[0]).toMatchObject({ state: 'skipped', attempts: 0 });
    });

    it('sends to a webhook URL given after it started, signed as before', async () => {
      await start({ webhookUrl: undefined });
      sim.emit('project.created', { project: { id: 'prj_8' } });
      sim.setWebhookUrl(receiver.url);
      const sent = sim.emit('project.created', { project: { id: 'prj_9' } });
      await sim.waitForIdle();
      expect(receiver.received.map((r) => r.event.id)).toEqual([sent.id]);
      expect(verify(receiver.received[0], 'hmac-sha256')).toEqual({ ok: true });
      expect(sim.webhooks.map((e) => e.state)).toEqual(['skipped', 'delivered']);
    });
  });
});
