/**
 * Small helpers for suites that drive the admin API: JSON requests, error
 * answers, paging, and waiting on what the admin API shows instead of for a
 * while: an event settled, the engine quiet.
 */
import type { RunningEngine } from './engine.js';
import { body } from './events.js';
import { waitUntil } from './wait.js';

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

/**
 * Ends a probe of `waitUntil` with "not yet" and says what it saw: the wait's
 * timeout error then names it ("…; last error: event evt_1: execution x running").
 */
export function notYet(seen: string): never {
  throw new Error(seen);
}

const UNFINISHED_RUN = ['pending', 'running', 'retrying'];

/** What is still going on for one event, from its detail; empty once it has settled. */
function stillGoing(detail: { status: string; executions: Array<{ id: string; status: string; actions?: Array<{ id: string; type: string; status: string }> }> }): string[] {
  const going: string[] = [];
  if (detail.status === 'received') going.push('not evaluated yet (received)');
  for (const execution of detail.executions) {
    if (execution.status === 'running') going.push(`execution ${execution.id} running`);
    for (const run of execution.actions ?? []) if (UNFINISHED_RUN.includes(run.status)) going.push(`action run ${run.id} (${run.type}) ${run.status}`);
  }
  return going;
}

/**
 * The event's detail once it has settled: evaluated (past `received`), every
 * execution it caused finished, and none of their action runs pending, running
 * or retrying.
 */
export function settledEvent(engine: Admin, eventId: string, timeoutMs = 10_000) {
  return waitUntil(
    async () => {
      const res = await engine.admin(`/admin/events/${encodeURIComponent(eventId)}`);
      if (res.status !== 200) notYet(`GET /admin/events/${eventId} answered ${res.status}`);
      const detail = await body(res);
      const going = stillGoing(detail);
      return going.length === 0 ? detail : notYet(`event ${eventId}: ${going.join(', ')}`);
    },
    { timeoutMs, what: `event ${eventId} to settle (evaluated, its executions and action runs finished)` },
  );
}

/**
 * What the engine still has to do, across its database: events not evaluated
 * yet, executions running, action runs pending, running or retrying. Empty when
 * nothing is left. Read in the order work moves: an event's evaluation records
 * its executions in the same transaction, and an execution stays running until
 * its last action run has ended (a manual retry sets it running again), so
 * work moving on between two reads is never missed by both.
 */
export async function unfinishedWork(engine: Admin): Promise<string[]> {
  const left: string[] = [];
  const lists: Array<[string, string]> = [
    ['/admin/events?status=received', 'event(s) received'],
    ['/admin/executions?status=running', 'execution(s) running'],
    ...UNFINISHED_RUN.map((status): [string, string] => [`/admin/actions?status=${status}`, `action run(s) ${status}`]),
  ];
  for (const [path, what] of lists) {
    const { items } = await allPages(engine, path, 500);
    if (items.length > 0) left.push(`${items.length} ${what}`);
  }
  return left;
}

/**
 * Resolves once the engine has nothing left to do (see `unfinishedWork`). With
 * no delivery in flight and no cron rule, a quiet engine stays quiet: nothing
 * is left that could send another request, so a test can then count what was
 * sent and know the count is final.
 */
export async function quietEngine(engine: Admin, timeoutMs = 10_000): Promise<void> {
  await waitUntil(
    async () => {
      const left = await unfinishedWork(engine);
      return left.length === 0 || notYet(left.join(', '));
    },
    { timeoutMs, what: 'the engine to have nothing left to do' },
  );
}
