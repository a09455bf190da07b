import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WebhookLogEntry } from '../simulator/simulator.js';
import { colors, type CliContext } from '../cli/cli-output.js';
import {
  conditionText, eventOutcome, failingConditions, renderStep, type AdminCondition, type AdminEvent, type StepRecord,
} from './demo-report.js';
import { playStory, runDemo, startDemo, type Demo } from './demo.js';

/** Random ports, so the suite runs next to a demo or an engine on 3000/4010. */
const ENV = { PORT: '0', SIMULATOR_PORT: '0' };

function capture(env: CliContext['env'] = ENV) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env, stdout: (l) => out.push(l), stderr: (l) => err.push(l), color: false };
  return { context, out, err };
}

const plain = colors(false);

function aCondition(overrides: Partial<AdminCondition> = {}): AdminCondition {
  return { fact: 'event', path: '$.data.task.title', operator: 'matches', value: '^Release', factValue: 'Draft', result: false, group: 'all[0]', ...overrides };
}

function anEvent(overrides: Partial<AdminEvent> = {}): AdminEvent {
  return { id: 'evt_1', type: 'task.completed', status: 'processed', rules: [], executions: [], ...overrides };
}

function aWebhook(type: string, id: string, data: Record<string, unknown>): WebhookLogEntry {
  return { event: { id, type, created_at: '2025-06-02T09:00:00.000Z', data }, state: 'delivered', attempts: 1, status: 202 };
}

describe('demo report', () => {
  describe(failingConditions.name, () => {
    it('names the conditions that failed, leaving out those never evaluated', () => {
      const failed = aCondition();
      const held = aCondition({ path: '$.data.task.project_id', operator: 'equal', value: 'prj_1', factValue: 'prj_1', result: true, group: 'all[1]' });
      const skipped = aCondition({ skipped: true, group: 'all[2]' });
      expect(failingConditions([failed, held, skipped])).toEqual([failed]);
    });

    it('under a not, names the condition that held', () => {
      const held = aCondition({ operator: 'startsWith', value: 'Review:', factValue: 'Review: x', result: true, group: 'not' });
      expect(failingConditions([held])).toEqual([held]);
      expect(conditionText(held)).toBe('not event $.data.task.title startsWith "Review:", actual "Review: x"');
    });
  });

  describe(conditionText.name, () => {
    it('shows fact, path, operator, expected and actual value', () => {
      const c = aCondition({ fact: 'changes', path: '$.status.to', operator: 'equal', value: 'blocked', factValue: 'completed' });
      expect(conditionText(c)).toBe('changes $.status.to equal "blocked", actual "completed"');
    });

    it('lists looked-up resources by id and leaves out the ignored value of isEmpty', () => {
      const c = aCondition({
        fact: 'tasks', params: { project_id: '{{ event.data.task.project_id }}' }, path: '$[?(@.status != "completed")]',
        operator: 'isEmpty', value: true, factValue: [{ id: 'tsk_1', title: 'a' }, { id: 'tsk_7', title: 'b' }],
      });
      expect(conditionText(c)).toBe('tasks(project_id) $[?(@.status != "completed")] isEmpty, actual [tsk_1, tsk_7]');
    });

    it('says when the fact held nothing', () => {
      expect(conditionText(aCondition({ factValue: undefined }))).toMatch(/actual nothing \(undefined\)$/);
    });
  });

  describe(eventOutcome.name, () => {
    it.each([
      [[], 'ignored (no rule listens to task.completed)', 'ignored'],
      [[{ rule: 'a', outcome: 'not_matched' }], 'ignored (1 rule listened, none matched)', 'ignored'],
      [[{ rule: 'a', outcome: 'matched' }, { rule: 'b', outcome: 'not_matched' }], 'processed (1 of 2 rules matched)', 'processed'],
    ])('%j → %s', (rules, text, status) => {
      expect(eventOutcome(anEvent({ status, rules }))).toBe(text);
    });
  });

  describe(renderStep.name, () => {
    it('puts the webhook the service sent back under the action that caused it', () => {
      const created = aWebhook('task.created', 'evt_back_000000000', { task: { id: 'tsk_9' } });
      const step: StepRecord = {
        title: 'Something happens',
        how: 'PATCH /v1/tasks/tsk_2 at the service → 200',
        triggers: [{ eventId: 'evt_1', type: 'task.completed' }],
        events: new Map([
          ['evt_1', anEvent({
            rules: [{ rule: 'follow-up', outcome: 'matched' }],
            executions: [{
              rule: 'follow-up', status: 'succeeded',
              actions: [{
                type: 'task.create', status: 'succeeded', request: { method: 'POST', path: '/tasks', body: { title: 'Review: x' } },
                response_status: 201, response: { id: 'tsk_9' }, error: null,
              }],
            }],
          })],
          ['evt_back_000000000', anEvent({ id: 'evt_back_000000000', type: 'task.created', status: 'ignored' })],
        ]),
        webhooks: [created],
        checks: [{ ok: true, text: 'the task exists' }, { ok: false, text: 'the workflow ran' }],
      };
      expect(renderStep(2, step, plain)).toEqual([
        '2. Something happens',
        '   PATCH /v1/tasks/tsk_2 at the service → 200',
        '   event task.completed evt_1 → processed (1 of 1 rule matched)',
        '     ✓ rule follow-up matched',
        '         → POST /v1/tasks {"title":"Review: x"} → 201 (id tsk_9)',
        '             ↩ service sent back task.created evt_back_000… → ignored (no rule listens to task.created)',
        '   ✓ the task exists',
        '   ✗ the workflow ran',
      ]);
    });

    it('says when the service could not deliver an event to the engine', () => {
      const refused: WebhookLogEntry = { ...aWebhook('task.completed', 'evt_x', {}), state: 'failed', status: 401, response: '{"error":{"code":"invalid_signature"}}' };
      const step: StepRecord = { title: 't', how: 'h', triggers: [{ eventId: 'evt_x', type: 'task.completed' }], events: new Map(), webhooks: [refused], checks: [] };
      expect(renderStep(1, step, plain)[2]).toBe(
        '   event task.completed evt_x → not delivered: the engine answered 401 {"error":{"code":"invalid_signature"}}',
      );
    });

    it('says why a rule was not evaluated or ran no action', () => {
      const step: StepRecord = {
        title: 'Loops and throttles',
        how: 'how',
        triggers: [{ eventId: 'evt_1', type: 'task.updated' }],
        events: new Map([['evt_1', anEvent({
          type: 'task.updated',
          rules: [{ rule: 'escalate', outcome: 'ignored_self_caused' }, { rule: 'notify', outcome: 'throttled', execution: 'x1' }],
          executions: [{ id: 'x1', rule: 'notify', status: 'throttled', actions: [] }],
        })]]),
        webhooks: [],
        checks: [],
      };
      expect(renderStep(1, step, plain).slice(2)).toEqual([
        '   event task.updated evt_1 → processed (1 of 2 rules matched)',
        "     · rule escalate not evaluated: the engine's own action caused this event (loop protection)",
        '     ✓ rule notify matched → throttled by options.throttle, no action run',
      ]);
    });
  });
});

describe(runDemo.name, () => {
  it('rejects an unknown argument with exit 2', async () => {
    const { context, err } = capture();
    expect(await runDemo(['--forever'], context)).toBe(2);
    expect(err).toEqual(['demo: unknown argument --forever', expect.stringMatching(/^usage: npm run demo/)]);
  });

  it('with --once plays the story, reports it and exits 0', async () => {
    const { context, out } = capture();
    expect(await runDemo(['--once'], context)).toBe(0);
    expect(out[0]).toBe('Automation engine demo');
    expect(out).toContain('1. A release task is completed in the service');
    expect(out.at(-1)).toBe('Everything the example rules promise happened at the service.');
    expect(out.join('\n')).not.toMatch(/whsec_demo_/);
  }, 60_000);
});

describe(startDemo.name, () => {
  it('starts the engine on another port when the one asked for is taken, and the service sends its webhooks there', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const demo = await startDemo({ ...ENV, PORT: String(port) }, () => undefined);
    try {
      expect(demo.world.engineUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(demo.world.engineUrl).not.toBe(`http://127.0.0.1:${port}`);
      const sent = demo.world.sim.emit('project.created', { project: { id: 'prj_port', name: 'Ports' } });
      const delivered = await demo.world.sim.waitForWebhook((e) => e.event.id === sent.id, 10_000);
      expect(delivered).toMatchObject({ state: 'delivered', status: 202 });
    } finally {
      await demo.close();
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  }, 60_000);
});

describe('the story', () => {
  let demo: Demo;
  const logs: string[] = [];

  beforeEach(async () => {
    demo = await startDemo(ENV, (line) => logs.push(line));
  });
  afterEach(() => demo.close());

  it('makes the engine create the follow-up task at the simulator, and says how', async () => {
    const { context, out } = capture();
    expect(await playStory(demo, context)).toBe(0);
    const tasks = [...demo.world.sim.state.tasks.values()];
    expect(tasks).toContainEqual(expect.objectContaining({ project_id: 'prj_1', title: 'Review: Release 1.0', status: 'open' }));
    const created = demo.world.sim.requests.filter((r) => r.method === 'POST' && r.path === '/v1/tasks');
    expect(created.every((r) => r.keyMode === 'test' && r.status === 201 && r.idempotencyKey !== undefined)).toBe(true);
    const text = out.join('\n');
    expect(text).toContain('✗ rule escalate-on-status-change did not match: changes $.status.to equal "blocked", actual "completed"');
    expect(text).toContain('✓ rule follow-up-on-completion matched');
    expect(text).toMatch(/→ POST \/v1\/tasks \{"project_id":"prj_1","title":"Review: Release 1\.0"\} → 201 \(id tsk_\d+\)\n\s+↩ service sent back task\.created evt_/);
    expect(text).toContain('→ PATCH /v1/tasks/tsk_3 {"priority":"high"} → 200 (id tsk_3)');
    expect(text).toContain('→ POST /v1/users {"email":"katherine@example.com","role":"member"} → 201');
  }, 60_000);

  it('reports an action the service refused, and counts the effect that did not happen', async () => {
    demo.world.sim.setFaults({
      script: [{ status: 422, method: 'POST', pathPrefix: '/users', code: 'validation_failed', message: 'domain not allowed', count: 5 }],
    });
    const { context, out } = capture();
    expect(await playStory(demo, context)).toBe(1);
    const text = out.join('\n');
    expect(text).toContain('→ POST /v1/users {"email":"katherine@example.com","role":"member"} → 422 failed: validation_failed domain not allowed');
    expect(text).toContain('✗ katherine@example.com was invited to the service');
  }, 60_000);
});
