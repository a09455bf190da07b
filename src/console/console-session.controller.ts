/**
 * Signing in to the console and out of it (console-sessions.ts). The token
 * comes in a JSON body only, never in a URL; the answer sets an HttpOnly,
 * SameSite=Strict cookie with a random session id.
 */
import { Controller, Delete, Get, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { readJson } from '../http/json-body.js';
import { ConsoleSessionRoute } from '../http/openapi-console.js';
import { isObject } from '../json.js';
import { sessionCookie } from './cookies.js';
import { ConsoleSessions, SESSION_COOKIE } from './console-sessions.js';

@ApiTags('console')
@Controller('console/session')
export class ConsoleSessionController {
  constructor(
    private readonly sessions: ConsoleSessions,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  @Post()
  @HttpCode(200)
  @ConsoleSessionRoute('sign-in')
  async signIn(@Req() req: Request, @Res({ passthrough: true }) res: Response) {
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
      throw new DomainError('bad_request', 'sign in with a JSON body {"token": "<ADMIN_TOKEN>"} (Content-Type: application/json)');
    }
    const body = await readJson(req, this.config.webhookMaxBytes);
    const session = this.sessions.signIn(isObject(body) ? body.token : undefined);
    res.setHeader('Set-Cookie', sessionCookie(SESSION_COOKIE, session.id, { secure: req.secure }));
    res.setHeader('Cache-Control', 'no-store');
    return { signed_in: true, expires_at: session.expiresAt.toISOString() };
  }

  @Get()
  @ConsoleSessionRoute('status')
  status(@Req() req: Request, @Res({ passthrough: true }) res: Response) {
    res.setHeader('Cache-Control', 'no-store');
    const expiresAt = this.sessions.touch(this.sessions.idOf(req));
    if (!expiresAt) throw new DomainError('unauthorized', 'not signed in to the console');
    return { signed_in: true, expires_at: expiresAt.toISOString() };
  }

  @Delete()
  @HttpCode(204)
  @ConsoleSessionRoute('sign-out')
  signOut(@Req() req: Request, @Res({ passthrough: true }) res: Response): void {
    this.sessions.signOut(this.sessions.idOf(req));
    res.setHeader('Set-Cookie', sessionCookie(SESSION_COOKIE, '', { secure: req.secure, maxAgeSeconds: 0 }));
  }
}
