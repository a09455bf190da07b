/**
 * Events, newest first and live: the page listens to the engine's feed
 * (server-sent events) and puts each new event, and each change of status, in
 * place without a reload. Filters live in the address, so a filtered view is a
 * link; cursor paging loads older events below.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, enc, withQuery } from '../api.js';
import { Badge, ErrorBox, PageTitle, useLoad } from '../components/common.js';
import { eventReason } from '../explain.js';
import { fromLocalInput, toLocalInput, when } from '../format.js';
import { Link, navigate, to, useLocation } from '../router.js';
import type { EventSummary, Page, RuleSummary } from '../types.js';

const FILTERS = ['type', 'status', 'resource', 'rule', 'since', 'until'] as const;
const STATUSES = ['received', 'processed', 'ignored', 'failed', 'loop_blocked'];

type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

export function filtersOf(query: URLSearchParams): Filters {
  return Object.fromEntries(FILTERS.map((k) => [k, query.get(k) ?? undefined]).filter(([, v]) => v)) as Filters;
}

const newestFirst = (a: EventSummary, b: EventSummary) => (a.received_at < b.received_at ? 1 : a.received_at > b.received_at ? -1 : 0);

/** Rows and a page of them, each event once (the page's copy is the newer), newest first. */
function merge(current: EventSummary[], page: EventSummary[]): EventSummary[] {
  const fresh = new Set(page.map((p) => p.id));
  return [...current.filter((r) => !fresh.has(r.id)), ...page].sort(newestFirst);
}

function useLiveEvents(filters: Filters, limit: number) {
  const [rows, setRows] = useState<EventSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [live, setLive] = useState<'connecting' | 'live' | 'reconnecting' | 'stopped'>('connecting');
  const [error, setError] = useState<unknown>();
  const key = JSON.stringify([filters, limit]);
  useEffect(() => {
    setRows([]);
    setCursor(null);
    setError(undefined);
    setLive('connecting');
    let source: EventSource | undefined;
    let closed = false;
    const load = (pageLimit: number, first: boolean) =>
      api<Page<EventSummary>>(withQuery('/admin/events', { ...filters, limit: pageLimit })).then(
        (page) => {
          if (closed) return;
          setRows((current) => merge(current, page.items));
          if (first) setCursor(page.next_cursor);
        },
        setError,
      );
    const upsert = (e: EventSummary) => setRows((current) => merge(current, [e]));
    const listen = () => {
      if (closed) return;
      source = new EventSource(withQuery('/admin/live/events', filters));
      // Once the feed has started, the newest events are read again: none that arrived before it is missed.
      source.addEventListener('ready', () => {
        setLive('live');
        void load(Math.min(limit, 50), false);
      });
      source.addEventListener('event', (m) => upsert(JSON.parse((m as MessageEvent<string>).data) as EventSummary));
      source.onerror = () => {
        const ended = source?.readyState === EventSource.CLOSED;
        setLive(ended ? 'stopped' : 'reconnecting');
        if (ended) api('/console/session').catch(() => undefined);
      };
    };
    // The first page first (main.tsx asked for it before the page rendered), then the feed.
    void load(limit, true).finally(listen);
    return () => {
      closed = true;
      source?.close();
    };
  }, [key]);
  const more = async () => {
    if (!cursor) return;
    try {
      const page = await api<Page<EventSummary>>(withQuery('/admin/events', { ...filters, limit, cursor }));
      setRows((current) => merge(current, page.items));
      setCursor(page.next_cursor);
    } catch (e) {
      setError(e);
    }
  };
  return { rows, cursor, live, error, more };
}

function FilterForm({ filters, limit, rules }: { filters: Filters; limit: number; rules: RuleSummary[] }) {
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    const value = (k: string) => String(form.get(k) ?? '').trim();
    navigate(
      withQuery(to.events(), {
        type: value('type'), status: value('status'), resource: value('resource'), rule: value('rule'),
        since: fromLocalInput(value('since')), until: fromLocalInput(value('until')), limit: value('limit') === '50' ? undefined : value('limit'),
      }),
    );
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="filter events" key={JSON.stringify(filters) + limit}>
      <label>Type <input name="type" defaultValue={filters.type} placeholder="task.completed" /></label>
      <label>
        Status
        <select name="status" defaultValue={filters.status ?? ''}>
          <option value="">any</option>
          {STATUSES.map((s) => <option key={s} value={s}>{s.replace('_', ' ')}</option>)}
        </select>
      </label>
      <label>Resource <input name="resource" defaultValue={filters.resource} placeholder="task:tsk_1" /></label>
      <label>
        Rule
        <select name="rule" defaultValue={filters.rule ?? ''}>
          <option value="">any</option>
          {rules.map((r) => <option key={r.id} value={r.id}>{r.id}</option>)}
        </select>
      </label>
      <label>Since <input type="datetime-local" name="since" defaultValue={filters.since ? toLocalInput(filters.since) : ''} /></label>
      <label>Until <input type="datetime-local" name="until" defaultValue={filters.until ? toLocalInput(filters.until) : ''} /></label>
      <label>
        Per page
        <select name="limit" defaultValue={String(limit)}>
          {[50, 100, 500].map((n) => <option key={n} value={String(n)}>{n}</option>)}
        </select>
      </label>
      <button type="submit">Filter</button>
      <button type="button" onClick={() => navigate(to.events())}>Clear</button>
    </form>
  );
}

function SearchById() {
  const input = useRef<HTMLInputElement>(null);
  const [error, setError] = useState<string>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const id = input.current?.value.trim() ?? '';
    if (!id) return;
    try {
      await api(`/admin/events/${enc(id)}`);
      navigate(to.event(id));
    } catch (err) {
      setError(err instanceof ApiError && err.status === 404 ? `No event with the id ${JSON.stringify(id)}.` : (err as Error).message);
    }
  };
  return (
    <form class="search" onSubmit={submit} role="search" aria-label="find an event by id">
      <label>Event id <input ref={input} name="id" placeholder="evt_…" /></label>
      <button type="submit">Find</button>
      {error ? <span class="error-text" role="alert">{error}</span> : null}
    </form>
  );
}

export function limitOf(query: URLSearchParams): number {
  return Math.min(500, Math.max(1, Number(query.get('limit') ?? 50) || 50));
}

/** The first page of events the page will ask for (main.tsx sends it before the first render). */
export function firstPagePath(query: URLSearchParams): string {
  return withQuery('/admin/events', { ...filtersOf(query), limit: limitOf(query) });
}

export function Events() {
  const { query } = useLocation();
  const filters = filtersOf(query);
  const limit = limitOf(query);
  const rules = useLoad(() => api<Page<RuleSummary>>('/admin/rules?limit=500'), 'rules');
  const { rows, cursor, live, error, more } = useLiveEvents(filters, limit);
  return (
    <>
      <PageTitle>Events</PageTitle>
      <div class="toolbar">
        <SearchById />
        <span class={`live live-${live}`} role="status" aria-live="polite">
          {live === 'live' ? '● Live: new events appear here' : live === 'connecting' ? 'Connecting…' : live === 'reconnecting' ? 'Live updates interrupted: reconnecting…' : 'Live updates stopped: reload the page'}
        </span>
      </div>
      <FilterForm filters={filters} limit={limit} rules={rules.data?.items ?? []} />
      <ErrorBox error={error} />
      <table class="events" data-rows={rows.length}>
        <thead>
          <tr><th scope="col">Received</th><th scope="col">Event</th><th scope="col">Type</th><th scope="col">Resource</th><th scope="col">Status</th><th scope="col">Why</th></tr>
        </thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.id} data-event={e.id}>
              <td class="nowrap">{when(e.received_at)}</td>
              <td class="id"><Link href={to.event(e.id)}>{e.id}</Link>{e.replay_of ? <span class="muted"> (replay)</span> : null}</td>
              <td>{e.type}</td>
              <td>{e.resource ?? '—'}</td>
              <td><Badge status={e.status} /></td>
              <td class="reason">{eventReason(e)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 && live === 'live' ? <p class="muted">No events yet{Object.keys(filters).length ? ' match these filters' : ''}.</p> : null}
      {cursor ? <button type="button" onClick={() => void more()}>Load older events</button> : null}
    </>
  );
}
