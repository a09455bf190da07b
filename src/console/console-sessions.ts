/**
 * Console sign-in. The admin token, sent once in a JSON body, is exchanged for
 * a random session id that the browser keeps in an HttpOnly, SameSite=Strict
 * cookie: the token itself never goes into a cookie, a URL or a log, and no
 * script of the page can read the session id. Sessions live in this process's
 * memory with an idle and an absolute expiry; signing out, or a restart,
 * forgets them. The admin guard accepts a live session alongside the Bearer
 * token, so every console request passes the same authorisation as the API.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { CONSOLE_COOKIE } from '../http/openapi-console.js';
import { readCookie } from './cookies.js';

/** The cookie's name (declared with the API in http/openapi-console.ts). */
export const SESSION_COOKIE = CONSOLE_COOKIE;
/** A session unused this long ends. */
export const SESSION_IDLE_MS = 8 * 3600_000;
/** A session ends this long after sign-in, used or not. */
export const SESSION_MAX_MS = 24 * 3600_000;
/** At most this many live sessions; signing in past it ends the oldest. */
const MAX_SESSIONS = 1_000;
/**
 * A request the console makes carries this header. Cross-origin pages cannot
 * add a custom header without a CORS preflight the engine never grants, so a
 * cookie-authenticated write without it is refused (see README, Console).
 */
export const CONSOLE_HEADER = 'x-engine-console';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

interface Session {
  createdAt: number;
  lastUsedAt: number;
}

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

@Injectable()
export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly expected: Buffer;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.expected = tokenDigest(config.adminToken);
  }

  /** True when `token` is the admin token (constant time, whatever its length). */
  isAdminToken(token: unknown): boolean {
    return typeof token === 'string' && token !== '' && timingSafeEqual(tokenDigest(token), this.expected);
  }

  /** A new session for the admin token; anything else is refused. */
  signIn(token: unknown): { id: string; expiresAt: Date } {
    if (!this.isAdminToken(token)) throw new DomainError('unauthorized', 'that is not the admin token');
    this.prune();
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
    const id = randomBytes(32).toString('base64url');
    const now = this.now();
    this.sessions.set(id, { createdAt: now, lastUsedAt: now });
    return { id, expiresAt: new Date(now + SESSION_MAX_MS) };
  }

  /** The session's end, when `id` names a live session (using it keeps it alive); else undefined. */
  touch(id: string | undefined): Date | undefined {
    if (id === undefined) return undefined;
    const session = this.sessions.get(id);
    if (!session) return undefined;
    const now = this.now();
    if (now - session.lastUsedAt > SESSION_IDLE_MS || now - session.createdAt > SESSION_MAX_MS) {
      this.sessions.delete(id);
      return undefined;
    }
    session.lastUsedAt = now;
    return new Date(Math.min(session.createdAt + SESSION_MAX_MS, now + SESSION_IDLE_MS));
  }

  signOut(id: string | undefined): void {
    if (id !== undefined) this.sessions.delete(id);
  }

  /** The session id a request's cookie carries. */
  idOf(req: Request): string | undefined {
    return readCookie(req.headers.cookie, SESSION_COOKIE);
  }

  /**
   * A request authorised by a live console session: its cookie names one, and a
   * write also carries the console's header (a page of another origin cannot add it).
   */
  authorises(req: Request): boolean {
    const id = this.idOf(req);
    if (id === undefined) return false;
    if (!SAFE_METHODS.has(req.method.toUpperCase()) && req.headers[CONSOLE_HEADER] !== '1') return false;
    return this.touch(id) !== undefined;
  }

  get size(): number {
    return this.sessions.size;
  }

  private prune(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) {
      if (now - s.lastUsedAt > SESSION_IDLE_MS || now - s.createdAt > SESSION_MAX_MS) this.sessions.delete(id);
    }
  }

  private now(): number {
    return this.clock.now().getTime();
  }
}
