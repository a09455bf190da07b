/**
 * The console's server side over real HTTP: signing in and out (the token in a
 * body, a session in an HttpOnly cookie, the same admin authorisation for every
 * request), the page and its files with their Content-Security-Policy, and the
 * admin reads the console added: the event list's new filters, the live feed,
 * the overview, and an event's context (chain, waiting, throttle, attempts).
 */
import { quietEngine, settledEvent } from './support/admin.js';
import { ensureConsoleBuilt, signIn, sseReader, withSession } from './support/console.js';
import { databasesUnderTest } from './support/databases.js';
import { TEST_ADMIN_TOKEN, type RunningEngine } from './support/engine.js';
import { aTaskEvent, body, deliver } from './support/events.js';
import { useRig } from './support/fixture.js';
import { reviewRelease, taskRule, updateMissing } from './support/rules-harness.js';
import { waitUntil } from './support/wait.js';

const kinds = await databasesUnderTest('console API');
ensureConsoleBuilt();

/** At most one execution per project per hour. */
const throttled = taskRule('once-per-project', 'task.created', 'Once', {
  options: { throttle: { limit: 1, windowSeconds: 3600, key: '{{ event.data.task.project_id }}' } },
});
/** Changes the task an update is about: its action targets the event's own resource. */
const touchUp = { id: 'touch-up', on: 'task.updated', actions: [{ type: 'task.update', params: { id: '{{ event.data.task.id }}', priority: 'high' } }] };
const rules = [reviewRelease, updateMissing, throttled, touchUp];

describe.each(kinds)('the console on $name', (kind) => {
  describe('signing in and out', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules } });

    it('refuses a wrong token and a body that is not JSON, and sets no cookie', async () => {
      const wrong = await signIn(rig.engine.url, 'not-the-admin-token-at-all');
      expect([wrong.res.status, (await body(wrong.res)).error.code, wrong.setCookie]).toEqual([401, 'unauthorized', null]);
      const form = await fetch(`${rig.engine.url}/console/session`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: `token=${TEST_ADMIN_TOKEN}` });
      expect([form.status, form.headers.get('set-cookie')]).toEqual([400, null]);
    });

    it('gives an HttpOnly, SameSite=Strict session cookie that holds no token', async () => {
      const { res, cookie, setCookie } = await signIn(rig.engine.url);
      expect(res.status).toBe(200);
      expect(await body(res)).toEqual({ signed_in: true, expires_at: expect.any(String) });
      expect(setCookie).toMatch(/^engine_console=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict$/);
      expect(cookie).not.toContain(TEST_ADMIN_TOKEN);
    });

    it('lets the session read the admin API, and write only with the console header', async () => {
      const { cookie } = await signIn(rig.engine.url);
      const page = withSession(rig.engine.url, cookie!);
      const bare = withSession(rig.engine.url, cookie!, { console: false });
      expect((await page('/console/session')).status).toBe(200);
      expect((await bare('/admin/rules')).status).toBe(200);
      expect((await bare('/admin/rules/release-review/disable', { method: 'POST' })).status).toBe(401);
      expect((await page('/admin/rules/release-review/disable', { method: 'POST' })).status).toBe(200);
      expect((await body(page('/admin/rules/release-review'))).enabled).toBe(false);
      expect((await page('/admin/rules/release-review/enable', { method: 'POST' })).status).toBe(200);
      expect((await page('/admin/rules', { headers: { Authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
      expect((await fetch(`${rig.engine.url}/admin/rules`, { headers: { Cookie: 'engine_console=made-up' } })).status).toBe(401);
    });

    it('forgets the session on sign-out and clears the cookie', async () => {
      const { cookie } = await signIn(rig.engine.url);
      const page = withSession(rig.engine.url, cookie!);
      const out = await page('/console/session', { method: 'DELETE' });
      expect(out.status).toBe(204);
      expect(out.headers.get('set-cookie')).toMatch(/^engine_console=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0$/);
      expect((await page('/admin/rules')).status).toBe(401);
      expect((await page('/console/session')).status).toBe(401);
    });
  });

  describe('the page and its files', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules } });

    it('serves the page at /console and at every deep link, with a strict CSP and no inline script', async () => {
      const page = await fetch(`${rig.engine.url}/console`);
      const deep = await fetch(`${rig.engine.url}/console/events/${encodeURIComponent('evt_<x>')}`);
      const html = await page.text();
      expect([page.status, deep.status, await deep.text()]).toEqual([200, 200, html]);
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe');
      expect(page.headers.get('x-content-type-options')).toBe('nosniff');
      expect(page.headers.get('cache-control')).toBe('no-store');
      expect([...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])).toEqual(['<script type="module" src="/console/assets/app.js">']);
      expect(html).not.toMatch(/\sstyle=|<style/);
    });

    it('serves the built files with the CSP, validators, and nothing else', async () => {
      const app = await fetch(`${rig.engine.url}/console/assets/app.js`);
      expect([app.status, app.headers.get('content-type'), app.headers.get('content-security-policy')]).toEqual([200, 'text/javascript; charset=utf-8', expect.stringContaining("script-src 'self'")]);
      const again = await fetch(`${rig.engine.url}/console/assets/app.js`, { headers: { 'If-None-Match': app.headers.get('etag')! } });
      expect(again.status).toBe(304);
      for (const path of ['/console/assets/nope.js', '/console/assets/index.html', '/console/assets/..%2F..%2Fpackage.json', '/console/assets/%2e%2e%2fpackage.json']) {
        expect([path, (await fetch(`${rig.engine.url}${path}`)).status]).toEqual([path, 404]);
      }
    });
  });

  describe('the event list and its live feed', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules } });
    let engine: RunningEngine;
    const released = aTaskEvent('task.completed', { title: 'Release 1', id: 'tsk_rel' });
    const docs = aTaskEvent('task.completed', { title: 'Write docs', id: 'tsk_docs' });
    const created = aTaskEvent('task.created', { title: 'New', id: 'tsk_new', project_id: 'prj_2' });
    let between: string;

    beforeAll(async () => {
      ({ engine } = rig);
      for (const event of [released, docs]) {
        expect((await deliver(engine.url, event)).status).toBe(202);
        await settledEvent(engine, event.id!);
      }
      between = new Date().toISOString();
      expect((await deliver(engine.url, created)).status).toBe(202);
      await settledEvent(engine, created.id!);
    });

    const ids = async (query: string) => ((await body(engine.admin(`/admin/events?${query}`))).items as Array<{ id: string }>).map((e) => e.id);

    it('filters by resource (kind:id, or a bare id), by rule evaluated, and by time received', async () => {
      expect(await ids('resource=task:tsk_rel')).toEqual([released.id]);
      expect(await ids('resource=tsk_docs')).toEqual([docs.id]);
      expect(await ids('rule=release-review')).toEqual([docs.id, released.id]);
      expect(await ids('rule=once-per-project')).toEqual([created.id]);
      expect(await ids(`since=${encodeURIComponent(between)}`)).toEqual([created.id]);
      expect(await ids(`until=${encodeURIComponent(between)}&type=task.completed`)).toEqual([docs.id, released.id]);
    });

    it('answers 400 with a detail per bad filter', async () => {
      const res = await engine.admin('/admin/events?since=yesterday&status=done');
      expect(res.status).toBe(400);
      expect((await body(res)).error.details.map((d: { path: string }) => d.path)).toEqual(['status', 'since']);
    });

    it('streams each new event that passes the filter, then its change of status', async () => {
      const res = await engine.admin('/admin/live/events?type=task.completed', { headers: { Accept: 'text/event-stream' } });
      expect([res.status, res.headers.get('content-type')]).toEqual([200, expect.stringMatching(/^text\/event-stream/)]);
      const stream = sseReader(res);
      try {
        await stream.until((m) => m.some((x) => x.event === 'ready'));
        const later = aTaskEvent('task.completed', { title: 'Release 2' });
        expect((await deliver(engine.url, aTaskEvent('task.created', { title: 'filtered out' }))).status).toBe(202);
        expect((await deliver(engine.url, later)).status).toBe(202);
        const all = await stream.until((m) => m.some((x) => x.event === 'event' && JSON.parse(x.data).status === 'processed'));
        const events = all.filter((m) => m.event === 'event').map((m) => JSON.parse(m.data) as { id: string; status: string });
        expect(events.map((e) => e.id)).toEqual(events.map(() => later.id));
        expect(events.at(-1)!.status).toBe('processed');
      } finally {
        await stream.close();
      }
    });

    it('refuses the feed without the token or a session', async () => {
      expect((await fetch(`${engine.url}/admin/live/events`)).status).toBe(401);
    });
  });

  describe('the overview and an event\'s context', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules, env: { ACTION_MAX_ATTEMPTS: '2' } } });

    it('counts the last hour by minute, the queues, the budget and the failed runs', async () => {
      const event = aTaskEvent('task.blocked');
      expect((await deliver(rig.engine.url, event)).status).toBe(202);
      await settledEvent(rig.engine, event.id!);
      // The failure's engine.action_run.failed event is work too: its evaluation comes a moment after.
      await quietEngine(rig.engine);
      const overview = await body(rig.engine.admin('/admin/overview'));
      expect(overview.failed_action_runs).toBe(1);
      expect(overview.queues).toEqual({ events: 0, actions: 0 });
      expect(overview.rate_budget).toEqual(expect.objectContaining({ limit_per_minute: 1000, last_ratelimit_remaining: expect.any(Number), paused_until: null }));
      expect(overview.events_per_minute).toHaveLength(60);
      const total = (series: Array<{ counts: Record<string, number> }>, key: string) => series.reduce((sum, m) => sum + (m.counts[key] ?? 0), 0);
      expect(total(overview.events_per_minute, 'processed')).toBe(1);
      expect(total(overview.action_runs_per_minute, 'failed')).toBe(1);
    });

    it('names the throttle key and limit of a throttled execution', async () => {
      const first = aTaskEvent('task.created', { project_id: 'prj_9' });
      const second = aTaskEvent('task.created', { project_id: 'prj_9' });
      for (const event of [first, second]) {
        expect((await deliver(rig.engine.url, event)).status).toBe(202);
        await settledEvent(rig.engine, event.id!);
      }
      const context = await body(rig.engine.admin(`/admin/events/${second.id}/context`));
      expect(context.throttled).toEqual([{ execution: expect.any(String), rule: 'once-per-project', key: 'prj_9', limit: 1, window_seconds: 3600 }]);
    });

    it('remembers each attempt of a run that failed, with what the service said', async () => {
      rig.sim.setFaults({ script: [{ status: 503, count: 2, method: 'POST', pathPrefix: '/tasks' }] });
      const event = aTaskEvent('task.completed', { title: 'Release 7' });
      expect((await deliver(rig.engine.url, event)).status).toBe(202);
      const detail = await settledEvent(rig.engine, event.id!, 20_000);
      const run = detail.executions[0].actions[0];
      expect(run.status).toBe('failed');
      const context = await body(rig.engine.admin(`/admin/events/${event.id}/context`));
      expect(context.attempts[run.id]).toEqual([
        expect.objectContaining({ outcome: 'http', status: 503, error: { code: 'service_unavailable', message: expect.any(String) } }),
        expect.objectContaining({ outcome: 'http', status: 503 }),
      ]);
      expect(context.caused_by).toBeNull();
      expect(context.waiting).toEqual([]);
    });

    it('says an event waits behind the unfinished action run of an earlier event about its resource', async () => {
      rig.sim.setFaults({ script: [{ delayMs: 3000, method: 'PATCH', pathPrefix: '/tasks' }] });
      const first = aTaskEvent('task.updated', { id: 'tsk_slow' });
      const second = aTaskEvent('task.updated', { id: 'tsk_slow' });
      expect((await deliver(rig.engine.url, first)).status).toBe(202);
      const running = await waitUntil(async () => {
        const d = await body(rig.engine.admin(`/admin/events/${first.id}`));
        return d.executions[0]?.actions?.[0]?.status === 'running' && d.executions[0].actions[0];
      }, { what: 'the first event\'s action run to be running' });
      expect((await deliver(rig.engine.url, second)).status).toBe(202);
      const context = await body(rig.engine.admin(`/admin/events/${second.id}/context`));
      expect(context.waiting).toEqual([{ kind: 'behind_action_runs', resource: 'task:tsk_slow', runs: [expect.objectContaining({ id: running.id, event_id: first.id, rule: 'touch-up', status: 'running' })] }]);
      await settledEvent(rig.engine, second.id!);
      expect((await body(rig.engine.admin(`/admin/events/${second.id}/context`))).waiting).toEqual([]);
    });

    it('answers 404 for an unknown event', async () => {
      expect((await rig.engine.admin('/admin/events/evt_unknown/context')).status).toBe(404);
    });
  });

  describe('the chain of engine-caused events', () => {
    const rig = useRig(kind, { per: 'block', simulator: false });

    it('links an event to the action that caused it, and the action\'s event to its echoes', async () => {
      const both = await rig.roundTrip([reviewRelease]);
      const event = aTaskEvent('task.completed', { title: 'Release 8' });
      expect((await deliver(both.engine.url, event)).status).toBe(202);
      const detail = await settledEvent(both.engine, event.id!);
      const run = detail.executions[0].actions[0];
      const echo = await waitUntil(async () => {
        const page = await body(both.engine.admin('/admin/events?type=task.created'));
        return page.items.find((e: { status: string }) => e.status !== 'received');
      }, { what: 'the webhook about the task the rule created' });
      await quietEngine(both.engine);
      const caused = await body(both.engine.admin(`/admin/events/${echo.id}/context`));
      expect(caused).toEqual(expect.objectContaining({ self_caused: true, depth: 1, caused_by: expect.objectContaining({ event_id: event.id, action_run: run.id, rule: 'release-review', action_type: 'task.create' }) }));
      const origin = await body(both.engine.admin(`/admin/events/${event.id}/context`));
      expect(origin.caused).toEqual([expect.objectContaining({ event_id: echo.id, action_run: run.id, type: 'task.created' })]);
    });
  });

  describe('rule file problems', () => {
    const rig = useRig(kind, { per: 'block', engine: { rules: [reviewRelease, { id: 'Not Valid', on: 'task.created', actions: [] }] } });

    it('lists the problems of the files the engine skipped', async () => {
      const { problems } = await body(rig.engine.admin('/admin/rule-problems'));
      expect(problems.length).toBeGreaterThan(0);
      expect(problems.every((p: { file: string }) => /rule-1\.json$/.test(p.file))).toBe(true);
      expect(problems).toContainEqual(expect.objectContaining({ path: '$.id' }));
    });
  });
});
