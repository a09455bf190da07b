import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { createApp, stopApp } from './app.js';
import { ConfigError, type EngineConfig, loadConfig } from './config/config.js';
import { databaseKind } from './database/data-source.js';
import { walCoalesceState } from './database/wal-coalesce.js';
import { boundHeapGrowth, youngGenerationNote } from './config/heap-growth.js';

function readConfig(): EngineConfig {
  try {
    return loadConfig(process.env, () => randomBytes(24).toString('base64url'));
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

async function main(): Promise<void> {
  boundHeapGrowth();
  const config = readConfig();
  const app = await createApp(config);
  await app.listen(config.port, config.host);
  const logger = new Logger('engine');
  logger.log({
    msg: 'engine started',
    url: `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`,
    database: databaseKind(config.databaseUrl),
    dryRun: config.dryRun,
    service: config.serviceApiUrl,
    webhooks: config.webhookSecrets.length > 0 ? 'verified' : 'disabled (WEBHOOK_SECRET not set)',
  });
  const walCoalesce = walCoalesceState();
  if (walCoalesce?.inUse === false) logger.warn({ msg: `SQLite writes its log frame by frame, slower: ${walCoalesce.reason}` });
  const note = youngGenerationNote(config.databaseUrl);
  if (note !== undefined) logger.warn({ msg: note });
  if (config.adminTokenGenerated) {
    // Written past the logger on purpose: the logger would redact it, and this is the one time it is shown.
    process.stdout.write(`\nADMIN_TOKEN was not set; this run's admin token is:\n  ${config.adminToken}\n\n`);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.log({ msg: 'stopping', signal });
    // Long enough for a request in flight at the service to end (as an action run's lease is).
    void stopApp(app, config.serviceTimeoutMs + 5_000).then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`engine failed to start: ${(error as Error).message}\n`);
  process.exit(1);
});
