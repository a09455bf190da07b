/** Small helpers for suites that drive the admin API: JSON requests, error answers, paging, waiting for events to settle. */
import type { RunningEngine } from './engine.js';
import { body, waitFor } from './events.js';

type Admin = Pick<RunningEngine, 'admin'>;

/** A request with a JSON body (the admin client already sets the content type). */
export function sendJson(method: string, payload: unknown): RequestInit {
  return { method, body: typeof payload === 'string' ? payload : JSON.stringify(payload) };
}

/** Status and `error` object of an answer that should be an error. */
export async function errorOf(res: Response | Promise<Response>): Promise<{ status: number; error: { code: string; message: string; details?: Array<{ path: string; message: string }> } }> {
  const answer = await res;
  const json = (await answer.json()) as { error: { code: string; message: string; details?: Array<{ path: string; message: string }> } };
  return { status: answer.status, error: json.error };
}

/**
 * Follows `next_cursor` from the first page to the last; fails on a page over
 * the limit or on more pages than items could explain (a cursor that loops).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function allPages(engine: Admin, path: string, limit: number): Promise<{ items: any[]; pages: number }> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const items: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  const separator = path.includes('?') ? '&' : '?';
  do {
    const query: string = `${separator}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const res = await engine.admin(`${path}${query}`);
    if (res.status !== 200) throw new Error(`GET ${path}${query} answered ${res.status}: ${await res.text()}`);
    const page = await body(res);
    if (!Array.isArray(page.items) || page.items.length > limit) throw new Error(`page ${pages + 1} of ${path} has ${page.items?.length} items (limit ${limit})`);
    items.push(...page.items);
    cursor = page.next_cursor;
    pages++;
    if (pages > items.length + 2) throw new Error(`paging ${path} does not end (${pages} pages, ${items.length} items)`);
  } while (cursor !== null);
  return { items, pages };
}

/** The event's detail once it is evaluated and every execution of it has finished. */
export function settledEvent(engine: Admin, eventId: string, timeoutMs = 10_000) {
  return waitFor(
    async () => {
      const res = await engine.admin(`/admin/events/${encodeURIComponent(eventId)}`);
      if (res.status !== 200) return undefined;
      const detail = await body(res);
      const done = detail.status !== 'received' && detail.executions.every((x: { status: string }) => x.status !== 'running');
      return done ? detail : undefined;
    },
    timeoutMs,
    `event ${eventId} to settle`,
  );
}
