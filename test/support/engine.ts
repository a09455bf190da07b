/**
 * Starts the real engine for end-to-end tests: in this process (fast, and the
 * test can reach its services), or as a child process running the built
 * dist/main.js (when a test must SIGKILL it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { createApp, stopApp } from '../../src/app.js';
import { loadConfig, type EngineConfig } from '../../src/config/config.js';
import { JsonLogger, Redactor } from '../../src/observability/json-logger.js';
import { secretsOf } from '../../src/config/config.js';
import { watchLog, watchSecret } from './secret-watch.js';

export const TEST_SECRET = 'whsec_test_secret_value_1234';
export const TEST_API_KEY = 'ac_test_e2e_key_abcdef123456';
export const TEST_ADMIN_TOKEN = 'admin_token_for_tests_0123456789';

export interface RunningEngine {
  url: string;
  config: EngineConfig;
  app: INestApplication;
  logs: string[];
  admin(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

/** A folder of rule files for one test. */
export function rulesDir(rules: unknown[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'engine-rules-'));
  rules.forEach((rule, i) => writeFileSync(join(dir, `rule-${i}.json`), JSON.stringify(rule, null, 2)));
  return dir;
}

export function engineEnv(overrides: Record<string, string | undefined>): Record<string, string | undefined> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    WEBHOOK_SECRET: TEST_SECRET,
    SERVICE_API_KEY: TEST_API_KEY,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    SERVICE_TIMEOUT_MS: '2000',
    LOG_LEVEL: 'info',
    ...overrides,
  };
}

function adminClient(url: string, token: string) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...(init.headers ?? {}) },
    });
}

let inProcessEngines = 0;

export async function startEngine(env: Record<string, string | undefined>): Promise<RunningEngine> {
  const config = loadConfig(engineEnv(env), () => 'generated-admin-token-for-tests');
  const logs: string[] = [];
  const logger = new JsonLogger(config.logLevel, new Redactor(secretsOf(config)), (line) => logs.push(line));
  // Whatever this engine was configured with must not show up in its answers or its log (secret-watch.ts).
  for (const secret of secretsOf(config)) watchSecret(secret, 'a secret an engine was configured with');
  watchLog(`in-process engine #${++inProcessEngines}`, logs);
  const app = await createApp(config, { logger });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  return { url, config, app, logs, admin: adminClient(url, config.adminToken), stop: () => stopApp(app) };
}

export interface EngineProcess {
  url: string;
  child: ChildProcess;
  output: string[];
  admin(path: string, init?: RequestInit): Promise<Response>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Runs `node dist/main.js` (build first) and resolves once it listens. */
export async function spawnEngine(env: Record<string, string | undefined>, port: number): Promise<EngineProcess> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    env: { ...process.env, ...engineEnv(env), PORT: String(port) } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const url = `http://127.0.0.1:${port}`;
  const childEnv = engineEnv(env);
  for (const name of ['WEBHOOK_SECRET', 'SERVICE_API_KEY', 'ADMIN_TOKEN']) {
    for (const secret of (childEnv[name] ?? '').split(',')) watchSecret(secret.trim(), `${name} of an engine process`);
  }
  watchLog(`the engine process on port ${port}`, output);
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`engine exited with ${child.exitCode}:\n${output.join('')}`);
    if (Date.now() > deadline) throw new Error(`engine did not start:\n${output.join('')}`);
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    child,
    output,
    admin: adminClient(url, TEST_ADMIN_TOKEN),
    kill: (signal = 'SIGKILL') =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
  };
}
