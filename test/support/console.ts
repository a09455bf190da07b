/**
 * Helpers for the console's suites: signing in over HTTP as the console's page
 * does (the token in a JSON body, the session back in a cookie), requests with
 * that cookie, reading a server-sent events stream, and making sure the
 * console's assets are built (`npm test` builds them; a single suite run by
 * hand builds them here when console/ changed).
 */
import { spawnSync } from 'node:child_process';
import { TEST_ADMIN_TOKEN } from './secrets.js';

export const SESSION_COOKIE = 'engine_console';

/** Builds dist-console/ when it is missing or older than console/. */
export function ensureConsoleBuilt(): void {
  const result = spawnSync(process.execPath, ['scripts/build-console.mjs', '--if-needed'], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`building the console failed:\n${result.stderr}`);
}

/** Signs in with `token` (the admin token unless told); the answer and the session cookie (`name=value`) it set. */
export async function signIn(url: string, token: unknown = TEST_ADMIN_TOKEN): Promise<{ res: Response; cookie: string | undefined; setCookie: string | null }> {
  const res = await fetch(`${url}/console/session`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }) });
  const setCookie = res.headers.get('set-cookie');
  const cookie = setCookie?.split(';')[0];
  return { res, cookie: cookie && cookie.startsWith(`${SESSION_COOKIE}=`) ? cookie : undefined, setCookie };
}

/** A request carrying the session cookie (and, when `console` is true, the console's header for writes). */
export function withSession(url: string, cookie: string, { console = true } = {}) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, {
      ...init,
      headers: { Cookie: cookie, ...(console ? { 'X-Engine-Console': '1' } : {}), 'Content-Type': 'application/json', ...(init.headers ?? {}) },
    });
}

export interface SseMessage {
  event: string;
  id?: string;
  data: string;
}

/**
 * Reads a server-sent events answer message by message: `until` resolves with
 * every message so far once `done` holds for them (or rejects when the stream
 * ends or the time is up); `close` ends the request.
 */
export function sseReader(res: Response) {
  const messages: SseMessage[] = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const parse = () => {
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.trim() === '' || block.startsWith(':')) continue;
      const message: SseMessage = { event: 'message', data: '' };
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') message.event = text;
        else if (field === 'id') message.id = text;
        else if (field === 'data') message.data += text;
      }
      messages.push(message);
    }
  };
  return {
    messages,
    async until(done: (messages: SseMessage[]) => boolean, timeoutMs = 10_000): Promise<SseMessage[]> {
      const deadline = Date.now() + timeoutMs;
      while (!done(messages)) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for stream messages; got ${JSON.stringify(messages).slice(0, 500)}`);
        const chunk = await Promise.race([reader.read(), new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), left).unref())]);
        if (chunk === 'timeout') continue;
        if (chunk.done) throw new Error(`the stream ended; got ${JSON.stringify(messages).slice(0, 500)}`);
        buffer += chunk.value;
        parse();
      }
      return messages;
    },
    close: () => reader.cancel().catch(() => undefined),
  };
}
