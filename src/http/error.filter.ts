/**
 * The one place errors become HTTP answers, always in the service's shape
 * `{"error":{"code","message","details?"}}`, never with a stack trace. A
 * refusal that waiting can cure (the database cannot take writes) carries
 * Retry-After, and is not logged here: the fault is logged once when it starts
 * and once when it ends, with the number of requests it refused.
 */
import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Response } from 'express';
import { DomainError, errorBody, StorageUnavailableError } from '../errors.js';

const HTTP_CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  503: 'unavailable',
};

@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) return;
    if (exception instanceof DomainError) {
      if (exception.code === 'payload_too_large') res.setHeader('Connection', 'close');
      if (exception.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(exception.retryAfterSeconds));
      if (exception instanceof StorageUnavailableError) exception.refused();
      res.status(exception.status).json(errorBody(exception.code, exception.message, exception.details));
      return;
    }
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const message = status === 404 ? 'no such route' : exception.message;
      res.status(status).json(errorBody(HTTP_CODES[status] ?? `http_${status}`, message));
      return;
    }
    this.logger.error(`unexpected error: ${(exception as Error)?.message ?? String(exception)}`, (exception as Error)?.stack);
    res.status(500).json(errorBody('internal_error', 'the engine failed to handle this request; see its log'));
  }
}
