/**
 * Every request the console makes: same origin, the session cookie sent by the
 * browser (the page never sees it), and on writes the header that tells the
 * engine the request comes from the console's own page (a page of another
 * origin cannot add it). A 401 means the session ended: the console shows the
 * sign-in form again.
 */
export const CONSOLE_HEADER = 'X-Engine-Console';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Array<{ path: string; message: string }> = [],
  ) {
    super(message);
  }
}

/** GET requests sent ahead of the first render (see `prefetch`), by path; each is used once. */
const early = new Map<string, Promise<unknown>>();

type Listener = (signedIn: boolean) => void;
const listeners = new Set<Listener>();

export function onSessionChange(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function sessionChanged(signedIn: boolean): void {
  early.clear(); // answers asked for under another session (or none) are not this session's
  for (const listener of listeners) listener(signedIn);
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
}

/**
 * Sends now a GET the page is about to make, so that it travels while the page
 * renders: the next `api(path)` takes its answer instead of asking again.
 */
export function prefetch(path: string): void {
  const answer = request(path, {});
  answer.catch(() => undefined); // a failure is reported to the caller that takes it
  early.set(path, answer);
}

export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const ahead = (options.method ?? 'GET') === 'GET' ? early.get(path) : undefined;
  if (ahead) {
    early.delete(path);
    return ahead as Promise<T>;
  }
  return request<T>(path, options);
}

async function request<T>(path: string, { method = 'GET', body }: RequestOptions): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (method !== 'GET') headers[CONSOLE_HEADER] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const error = (json as { error?: { code?: string; message?: string; details?: Array<{ path: string; message: string }> } } | undefined)?.error;
    if (res.status === 401 && !path.startsWith('/console/session')) sessionChanged(false);
    throw new ApiError(res.status, error?.code ?? `http_${res.status}`, error?.message ?? `the engine answered ${res.status}`, error?.details ?? []);
  }
  return json as T;
}

/** A path with a query from the given values, leaving out the empty ones. */
export function withQuery(path: string, query: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  const text = params.toString();
  return text === '' ? path : `${path}?${text}`;
}

export const enc = encodeURIComponent;
