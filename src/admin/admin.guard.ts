import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';

/** Bearer-token check for /admin/*, compared in constant time whatever the token's length. */
@Injectable()
export class AdminGuard implements CanActivate {
  private readonly expected: Buffer;

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    this.expected = digest(config.adminToken);
  }

  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<Request>().headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (!match || !timingSafeEqual(digest(match[1]), this.expected)) {
      throw new DomainError('unauthorized', 'a valid admin token is required: Authorization: Bearer <ADMIN_TOKEN>');
    }
    return true;
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
