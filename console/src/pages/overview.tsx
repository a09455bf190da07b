/** The engine at a glance: health, work waiting, the rate budget, loops, failures, the last hour. */
import { api } from '../api.js';
import { MinuteChart } from '../components/chart.js';
import { ErrorBox, Loading, PageTitle, useEvery, useLoad } from '../components/common.js';
import { ago, when } from '../format.js';
import { Link, to } from '../router.js';
import type { Overview as OverviewData } from '../types.js';

interface Health {
  live: boolean;
  ready: boolean;
  detail: string;
}

async function health(): Promise<Health> {
  const live = await fetch('/health').then((r) => r.ok, () => false);
  const res = await fetch('/health/ready').catch(() => undefined);
  const body = (await res?.json().catch(() => undefined)) as { rules?: number; error?: { code: string; message: string } } | undefined;
  const detail = res?.ok ? `ready: database answers and takes writes; ${body?.rules ?? '?'} rules loaded` : `not ready: ${body?.error?.message ?? 'no answer'}`;
  return { live, ready: res?.ok === true, detail };
}

function Stat({ label, value, note, href, alert }: { label: string; value: string | number; note?: string; href?: string; alert?: boolean }) {
  const content = (
    <>
      <span class="stat-value">{value}</span>
      <span class="stat-label">{label}</span>
      {note ? <span class="stat-note">{note}</span> : null}
    </>
  );
  return <div class={`stat${alert ? ' alert' : ''}`}>{href ? <Link href={href}>{content}</Link> : content}</div>;
}

export function Overview() {
  const data = useLoad(async () => ({ overview: await api<OverviewData>('/admin/overview'), health: await health() }), 'overview');
  useEvery(5_000, true, () => void data.reload());
  if (!data.data) return data.error ? <ErrorBox error={data.error} /> : <Loading />;
  const { overview: o, health: h } = data.data;
  const budget = o.rate_budget;
  return (
    <>
      <PageTitle>Overview</PageTitle>
      <ErrorBox error={data.error} />
      <div class="stats" data-testid="overview-stats">
        <Stat label="health" value={h.live && h.ready ? 'ready' : h.live ? 'not ready' : 'down'} note={h.detail} alert={!h.ready} />
        <Stat label="events waiting" value={o.queues.events} note="not evaluated yet" href={to.events('?status=received')} />
        <Stat label="action runs unfinished" value={o.queues.actions} note="pending, running or retrying" />
        <Stat
          label="rate budget"
          value={`${budget.remaining_in_window}/${budget.limit_per_minute}`}
          note={`left this minute · last X-RateLimit-Remaining: ${budget.last_ratelimit_remaining ?? 'none yet'}${budget.paused_until ? ` · calls held until ${when(budget.paused_until)}` : ''}`}
          alert={budget.paused_until !== null}
        />
        <Stat label="loops blocked" value={o.loops_blocked.last_hour} note={`last hour · ${o.loops_blocked.retained} retained · MAX_CHAIN_DEPTH ${o.loops_blocked.max_chain_depth}`} href={to.events('?status=loop_blocked')} alert={o.loops_blocked.last_hour > 0} />
        <Stat label="failed action runs" value={o.failed_action_runs} note="waiting for an operator" href={to.failed()} alert={o.failed_action_runs > 0} />
        <Stat label="rules" value={`${o.rules.enabled}/${o.rules.loaded}`} note={`enabled · ${o.rules.file_problems} file problem(s)`} href={to.rules()} alert={o.rules.file_problems > 0} />
      </div>
      {o.dry_run ? <p class="notice">Dry run: actions are recorded with the request they would send, and nothing is sent (DRY_RUN, or no SERVICE_API_KEY).</p> : null}
      <section class="card">
        <h2>The last hour</h2>
        <MinuteChart label="Events per minute, by status" series={o.events_per_minute} keys={['processed', 'ignored', 'failed', 'loop_blocked', 'received']} />
        <MinuteChart label="Action runs per minute, by outcome" series={o.action_runs_per_minute} keys={['succeeded', 'failed', 'skipped']} />
        <p class="muted">As of {when(o.now)} ({ago(o.now)}); refreshed every 5 seconds.</p>
      </section>
    </>
  );
}
