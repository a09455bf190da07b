/**
 * Starts the real engine for end-to-end tests: in this process (fast, and the
 * test can reach its services), or as a child process running the built
 * dist/bundle/main.js, what `npm start` runs (when a test must SIGKILL it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { createApp, stopApp } from '../../src/app.js';
import { loadConfig, type EngineConfig } from '../../src/config/config.js';
import { engineNodeOptions } from '../../src/config/heap-growth.js';
import { JsonLogger, Redactor } from '../../src/observability/json-logger.js';
import { secretsOf } from '../../src/config/config.js';
import { watchLog, watchSecret } from './secret-watch.js';
import { waitUntil } from './wait.js';

import { TEST_ADMIN_TOKEN, TEST_API_KEY, TEST_SECRET } from './secrets.js';

export { TEST_ADMIN_TOKEN, TEST_API_KEY, TEST_SECRET };

export interface RunningEngine {
  url: string;
  config: EngineConfig;
  app: INestApplication;
  logs: string[];
  admin(path: string, init?: RequestInit): Promise<Response>;
  /** Stops it; calling it again waits for the same stop. */
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
  let stopping: Promise<void> | undefined;
  return { url, config, app, logs, admin: adminClient(url, config.adminToken), stop: () => (stopping ??= stopApp(app)) };
}

export interface EngineProcess {
  url: string;
  port: number;
  child: ChildProcess;
  output: string[];
  admin(path: string, init?: RequestInit): Promise<Response>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  /** The engine's entry file; `dist/bundle/main.js` (the shipped build, what `npm start` runs) unless told. */
  script?: string;
  /** Node flags before the script (e.g. `--cpu-prof`); unless given, those `npm start` gives it for its database (engineNodeOptions). */
  nodeArgs?: string[];
  /** Called with the child at once, before it answers: to register it for clean-up. */
  onSpawn?(child: ChildProcess): void;
}

function killer(child: ChildProcess) {
  return (signal: NodeJS.Signals = 'SIGKILL') =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill(signal);
    });
}

/** Resolves once the child answers /health; rejects (and kills it) when it exits or does not answer within 30 s. */
async function untilListening(child: ChildProcess, url: string, output: string[]): Promise<void> {
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const probe = async () => (exited() ? 'exited' : (await fetch(`${url}/health`).then((r) => r.ok, () => false)) && 'listening');
  const outcome = await waitUntil(probe, { timeoutMs: 30_000, intervalMs: 100, what: `the engine at ${url}` }).catch(async (error: Error) => {
    await killer(child)();
    throw new Error(`engine did not start (${error.message}):\n${output.join('')}`);
  });
  if (outcome === 'exited') throw new Error(`engine exited with ${child.exitCode ?? child.signalCode}:\n${output.join('')}`);
}

/** The built engine the child-process suites run unless told otherwise: `npm start`'s (scripts/build-engine.mjs). */
const ENGINE_MAIN = 'dist/bundle/main.js';

/** Runs `node dist/bundle/main.js` (build first), or `options.script`, and resolves once it answers /health. */
export async function spawnEngine(env: Record<string, string | undefined>, port: number, options: SpawnOptions = {}): Promise<EngineProcess> {
  const script = options.script ?? ENGINE_MAIN;
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first (npm test does)`);
  const childEnv = engineEnv(env);
  const processEnv = { ...process.env, ...childEnv, PORT: String(port) } as NodeJS.ProcessEnv;
  const child = spawn(process.execPath, [...(options.nodeArgs ?? engineNodeOptions(processEnv.DATABASE_URL)), script], {
    env: processEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  options.onSpawn?.(child);
  const output: string[] = [];
  const url = `http://127.0.0.1:${port}`;
  for (const name of ['WEBHOOK_SECRET', 'SERVICE_API_KEY', 'ADMIN_TOKEN']) {
    for (const secret of (childEnv[name] ?? '').split(',')) watchSecret(secret.trim(), `${name} of an engine process`);
  }
  watchLog(`the engine process on port ${port}`, output);
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  await untilListening(child, url, output);
  const kill = killer(child);
  let killed = false;
  // An engine that ends by itself (a crash) says why where the test's output shows it: otherwise only "fetch failed" would.
  child.once('exit', (code, signal) => {
    // A stop a test asked for (SIGTERM, SIGINT: exit 0) is not news; a crash or an unexpected kill is.
    const asked = killed || code === 0 || signal === 'SIGTERM' || signal === 'SIGINT';
    if (!asked) process.stderr.write(`\nengine at ${url} exited by itself (${code ?? signal}); its last output:\n${output.slice(-30).join('')}\n`);
  });
  return { url, port, child, output, admin: adminClient(url, TEST_ADMIN_TOKEN), kill: (signal) => ((killed = true), kill(signal)) };
}
