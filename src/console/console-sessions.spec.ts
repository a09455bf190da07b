import type { Request } from 'express';
import type { EngineConfig } from '../config/config.js';
import { ConsoleSessions, SESSION_IDLE_MS, SESSION_MAX_MS } from './console-sessions.js';

const TOKEN = 'the-admin-token-0123456789';

function setUp() {
  let now = Date.parse('2026-11-23T10:00:00.000Z');
  const clock = { now: () => new Date(now) };
  const sessions = new ConsoleSessions({ adminToken: TOKEN } as EngineConfig, clock);
  return { sessions, advance: (ms: number) => (now += ms) };
}

const request = (method: string, cookie?: string, console = false) =>
  ({ method, headers: { ...(cookie ? { cookie } : {}), ...(console ? { 'x-engine-console': '1' } : {}) } }) as unknown as Request;

describe(ConsoleSessions.name, () => {
  describe('signing in', () => {
    it('gives a random session id for the admin token, never the token itself', () => {
      const { sessions } = setUp();
      const a = sessions.signIn(TOKEN);
      const b = sessions.signIn(TOKEN);
      expect(a.id).not.toBe(b.id);
      expect(a.id).not.toContain(TOKEN);
      expect(a.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    });

    it.each([['another token', 'not-the-admin-token'], ['an empty one', ''], ['no string', 42], ['nothing', undefined]])('refuses %s', (_case, token) => {
      const { sessions } = setUp();
      expect(() => sessions.signIn(token)).toThrow(expect.objectContaining({ code: 'unauthorized' }));
      expect(sessions.size).toBe(0);
    });
  });

  describe('a session', () => {
    it('lives while it is used, and ends when unused for the idle time', () => {
      const { sessions, advance } = setUp();
      const { id } = sessions.signIn(TOKEN);
      advance(SESSION_IDLE_MS - 1);
      expect(sessions.touch(id)).toBeDefined();
      advance(SESSION_IDLE_MS - 1);
      expect(sessions.touch(id)).toBeDefined();
      advance(SESSION_IDLE_MS + 1);
      expect(sessions.touch(id)).toBeUndefined();
    });

    it('ends at the absolute limit however much it is used', () => {
      const { sessions, advance } = setUp();
      const { id } = sessions.signIn(TOKEN);
      for (let used = 0; used < SESSION_MAX_MS; used += SESSION_IDLE_MS / 2) {
        expect(sessions.touch(id)).toBeDefined();
        advance(SESSION_IDLE_MS / 2);
      }
      advance(1);
      expect(sessions.touch(id)).toBeUndefined();
    });

    it('is forgotten on sign-out', () => {
      const { sessions } = setUp();
      const { id } = sessions.signIn(TOKEN);
      sessions.signOut(id);
      expect(sessions.touch(id)).toBeUndefined();
    });
  });

  describe('authorising a request', () => {
    it('accepts a read with the session cookie, and a write only with the console header as well', () => {
      const { sessions } = setUp();
      const { id } = sessions.signIn(TOKEN);
      const cookie = `engine_console=${id}`;
      expect(sessions.authorises(request('GET', cookie))).toBe(true);
      expect(sessions.authorises(request('POST', cookie))).toBe(false);
      expect(sessions.authorises(request('DELETE', cookie))).toBe(false);
      expect(sessions.authorises(request('POST', cookie, true))).toBe(true);
    });

    it('refuses no cookie, an unknown session and an ended one', () => {
      const { sessions } = setUp();
      const { id } = sessions.signIn(TOKEN);
      expect(sessions.authorises(request('GET'))).toBe(false);
      expect(sessions.authorises(request('GET', 'engine_console=made-up'))).toBe(false);
      sessions.signOut(id);
      expect(sessions.authorises(request('GET', `engine_console=${id}`))).toBe(false);
    });
  });
});
