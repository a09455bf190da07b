import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { ConsoleSessions } from '../console/console-sessions.js';

/**
 * Bearer-token check for /admin/*, compared in constant time whatever the token's
 * length. The console's signed-in session (an HttpOnly cookie, console-sessions.ts)
 * is accepted too, so that every console request passes this same check.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  private readonly expected: Buffer;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly sessions: ConsoleSessions,
  ) {
    this.expected = digest(config.adminToken);
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (match && timingSafeEqual(digest(match[1]), this.expected)) return true;
    if (!match && this.sessions.authorises(req)) return true;
    throw new DomainError('unauthorized', 'a valid admin token is required: Authorization: Bearer <ADMIN_TOKEN>');
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
