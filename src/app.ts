/** Builds the engine's Nest application; used by main.ts and by the end-to-end tests. */
import 'reflect-metadata';
import type { INestApplication, LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { type Clock, systemClock } from './clock.js';
import { type EngineConfig, secretsOf } from './config/config.js';
import { IntakeService } from './intake/intake.service.js';
import { serveWebhooksFirst } from './intake/webhook-route.js';
import { JsonLogger, Redactor } from './observability/json-logger.js';
import { Workers } from './processing/workers.js';
import { setupOpenApi } from './http/openapi.js';

export interface AppOptions {
  clock?: Clock;
  logger?: LoggerService | false;
}

export async function createApp(config: EngineConfig, options: AppOptions = {}): Promise<INestApplication> {
  const logger = options.logger ?? new JsonLogger(config.logLevel, new Redactor(secretsOf(config)));
  // Body parsing is off: webhooks must be verified on the raw bytes, and each
  // route reads its body itself with the size limit checked first.
  const app = await NestFactory.create(AppModule.forConfig(config, options.clock ?? systemClock), {
    bodyParser: false,
    logger,
  });
  app.getHttpAdapter().getInstance().disable('x-powered-by');
  setupOpenApi(app);
  serveWebhooksFirst(app.getHttpServer(), app.get(IntakeService), config.webhookMaxBytes);
  return app;
}

/**
 * Graceful stop: refuse new webhooks, finish or hand back work in hand, close the database.
 * Nest closes the HTTP server before it runs shutdown hooks, so the workers are drained first:
 * while they finish, deliveries are answered 503 `shutting_down` instead of finding the port closed.
 */
export async function stopApp(app: INestApplication, timeoutMs = 10_000): Promise<void> {
  app.get(IntakeService).stopAccepting();
  const stopped = app.get(Workers).stop().then(() => app.close());
  await Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
}
