/**
 * `npm run demo [-- --once]`: the simulator and the engine in one process, wired
 * to each other with a fresh webhook secret, the example rules from rules/ and a
 * throw-away SQLite file; then a short story (demo-story.ts) and what the engine
 * did about it, as chains (demo-report.ts). Stays up until Ctrl-C so the admin
 * API can be explored; `--once` (or DEMO_ONCE=1) exits after the story: 0 when
 * everything expected happened at the simulator, 1 otherwise.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { INestApplication } from '@nestjs/common';
import { createApp, stopApp } from '../app.js';
import { loadConfig, secretsOf, type EngineConfig } from '../config/config.js';
import { JsonLogger, Redactor } from '../observability/json-logger.js';
import { startSimulator, type Simulator } from '../simulator/simulator.js';
import { colors, isEntryFile, plural, processContext, type CliContext } from '../cli/cli-output.js';
import { waitUntil } from '../wait.js';
import { renderStep } from './demo-report.js';
import { playStep, STORY, type DemoWorld } from './demo-story.js';

export const USAGE = 'usage: npm run demo [-- --once]   (--once or DEMO_ONCE=1: play the story, then exit)';

/** rules/ and examples/ of this repository, wherever the command is started from (src/cli or dist/cli). */
const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
export const EXAMPLE_RULES = join(REPOSITORY, 'rules');
export const EXAMPLE_EVENTS = join(REPOSITORY, 'examples', 'events');

export interface Demo {
  world: DemoWorld;
  app: INestApplication;
  config: EngineConfig;
  /** Where the throw-away database lives; undefined when DATABASE_URL was given. */
  tempDir?: string;
  /** Whether the webhook secret came from WEBHOOK_SECRET (else it was generated and is never shown). */
  secretFromEnv: boolean;
  close(): Promise<void>;
}

const token = (bytes: number) => randomBytes(bytes).toString('hex');

function preferredPort(raw: string | undefined, fallback: number): number {
  const n = Number(raw === undefined || raw.trim() === '' ? fallback : raw);
  return Number.isInteger(n) && n >= 0 && n <= 65_535 ? n : fallback;
}

/**
 * The preferred port when it is free, else 0: the system picks one when the
 * engine listens. Never a port found free and let go, which another process
 * may take before the engine listens on it.
 */
function freeOrAny(preferred: number): Promise<number> {
  return new Promise<number>((resolve) => {
    if (preferred === 0) return resolve(0);
    const server = createServer();
    server.once('error', () => resolve(0));
    server.listen(preferred, '127.0.0.1', () => server.close(() => resolve(preferred)));
  });
}

async function startSimulatorOn(preferred: number, options: Parameters<typeof startSimulator>[0]): Promise<Simulator> {
  try {
    return await startSimulator({ ...options, port: preferred });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    return startSimulator({ ...options, port: 0 });
  }
}

interface Wiring {
  enginePort: number;
  simulatorUrl: string;
  apiKey: string;
  /** WEBHOOK_SECRET as given (several allowed), or the generated one. */
  webhookSecrets: string;
  databaseUrl: string | undefined;
}

/** A clean environment on purpose: a production SERVICE_API_KEY in the shell must not reach the demo. */
function engineConfig(env: CliContext['env'], wiring: Wiring): EngineConfig {
  return loadConfig(
    {
      PORT: String(wiring.enginePort),
      HOST: '127.0.0.1',
      DATABASE_URL: wiring.databaseUrl,
      RULES_DIR: EXAMPLE_RULES,
      SERVICE_API_URL: wiring.simulatorUrl,
      SERVICE_API_KEY: wiring.apiKey,
      DRY_RUN: 'false',
      WEBHOOK_SECRET: wiring.webhookSecrets,
      ADMIN_TOKEN: env.ADMIN_TOKEN,
      // Few attempts, so an action that keeps failing shows up as failed within the story's wait.
      ACTION_MAX_ATTEMPTS: '3',
      SERVICE_TIMEOUT_MS: '5000',
      LOG_LEVEL: 'warn',
    },
    () => `demo_admin_${token(12)}`,
  );
}

/** Starts the simulator and the engine, wired to each other. */
export async function startDemo(env: CliContext['env'], log: (line: string) => void): Promise<Demo> {
  // WEBHOOK_SECRET from the shell lets `npm run send-event` (same shell) post to the demo engine.
  const given = env.WEBHOOK_SECRET?.split(',').map((s) => s.trim()).find((s) => s !== '');
  const secret = given ?? `whsec_demo_${token(16)}`;
  const apiKey = `ac_test_demo_${token(12)}`;
  const enginePort = await freeOrAny(preferredPort(env.PORT, 3000));
  // Webhooks get their address once the engine listens, on the port it was given.
  const sim = await startSimulatorOn(preferredPort(env.SIMULATOR_PORT, 4010), {
    host: '127.0.0.1',
    webhookSecret: secret,
    signatureScheme: 'hmac-sha256',
  });
  const tempDir = env.DATABASE_URL?.trim() ? undefined : mkdtempSync(join(tmpdir(), 'engine-demo-'));
  let app: INestApplication | undefined;
  const close = async () => {
    if (app) await stopApp(app);
    await sim.close();
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  };
  try {
    const databaseUrl = tempDir ? `sqlite:${join(tempDir, 'engine.sqlite')}` : env.DATABASE_URL;
    const config = engineConfig(env, { enginePort, simulatorUrl: sim.url, apiKey, webhookSecrets: given ? String(env.WEBHOOK_SECRET) : secret, databaseUrl });
    const logger = new JsonLogger(config.logLevel, new Redactor(secretsOf(config)), (line) => log(line.trimEnd()));
    app = await createApp(config, { logger });
    await app.listen(config.port, '127.0.0.1');
    const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
    const engineUrl = `http://127.0.0.1:${port}`;
    sim.setWebhookUrl(`${engineUrl}/webhooks`);
    await waitUntilReady(engineUrl);
    const world: DemoWorld = { sim, engineUrl, adminToken: config.adminToken, secret, scheme: 'hmac-sha256', apiKey, examplesDir: EXAMPLE_EVENTS };
    return { world, app, config, tempDir, secretFromEnv: given !== undefined, close };
  } catch (error) {
    await close();
    throw error;
  }
}

function waitUntilReady(engineUrl: string, timeoutMs = 15_000): Promise<unknown> {
  const ready = () => fetch(`${engineUrl}/health/ready`).then((r) => r.ok);
  return waitUntil(ready, { timeoutMs, what: `the engine at ${engineUrl} to be ready` });
}

async function rulesLoaded(engineUrl: string): Promise<string> {
  const answer = (await fetch(`${engineUrl}/health/ready`).then((r) => r.json())) as { rules?: number };
  return typeof answer.rules === 'number' ? plural(answer.rules, 'rule') : 'rules';
}

/** Plays the story and prints it; returns how many expected effects did not happen. */
export async function playStory(demo: Demo, context: CliContext): Promise<number> {
  const paint = colors(context.color);
  let failures = 0;
  for (const [i, step] of STORY.entries()) {
    const record = await playStep(demo.world, step);
    for (const line of renderStep(i + 1, record, paint)) context.stdout(line);
    context.stdout('');
    failures += record.checks.filter((c) => !c.ok).length;
  }
  return failures;
}

function printHeader(demo: Demo, rules: string, context: CliContext): void {
  const paint = colors(context.color);
  const { world, config, tempDir } = demo;
  const database = tempDir ? `throw-away SQLite in ${tempDir}` : `DATABASE_URL (${config.databaseUrl.split(':')[0]})`;
  context.stdout(paint.bold('Automation engine demo'));
  context.stdout(`  service (simulator)  ${world.sim.url}  webhooks → ${world.engineUrl}/webhooks, signed hmac-sha256`);
  context.stdout(`  engine               ${world.engineUrl}  ${rules} from rules/, ${database}, live calls with a test key`);
  context.stdout('');
}

function printWhereToLook(demo: Demo, context: CliContext): void {
  const paint = colors(context.color);
  const { world } = demo;
  context.stdout(paint.bold('Running until Ctrl-C:'));
  context.stdout(`  engine      ${world.engineUrl}   (admin token ${world.adminToken})`);
  context.stdout(`  simulator   ${world.sim.url}   (state at ${world.sim.origin}/_sim/state)`);
  context.stdout(`  try         curl -H "Authorization: Bearer ${world.adminToken}" ${world.engineUrl}/admin/events`);
  if (demo.secretFromEnv) {
    context.stdout(`              npm run send-event -- examples/events/task-completed.json --url ${world.engineUrl}/webhooks`);
    return;
  }
  // The generated webhook secret is never shown; events can still be injected through the admin API.
  context.stdout(`              curl -H "Authorization: Bearer ${world.adminToken}" -H "Content-Type: application/json" \\`);
  context.stdout(`                   --data-binary @examples/events/task-completed.json ${world.engineUrl}/admin/events`);
  context.stdout(`              (for npm run send-event, start the demo with WEBHOOK_SECRET=… set in the same shell)`);
}

export interface RunOptions {
  /** Resolves when the demo should stop (a signal); only used without --once. */
  untilStopped?: () => Promise<unknown>;
}

/** Runs the command; returns the exit code. */
export async function runDemo(args: readonly string[], context: CliContext, options: RunOptions = {}): Promise<number> {
  const unknown = args.filter((a) => a !== '--once' && a !== '-h' && a !== '--help');
  if (unknown.length > 0) {
    context.stderr(`demo: unknown argument ${unknown[0]}`);
    context.stderr(USAGE);
    return 2;
  }
  if (args.includes('-h') || args.includes('--help')) {
    context.stdout(USAGE);
    return 0;
  }
  const once = args.includes('--once') || /^(1|true|yes)$/i.test(context.env.DEMO_ONCE ?? '');
  const paint = colors(context.color);
  let demo: Demo;
  try {
    demo = await startDemo(context.env, context.stderr);
  } catch (error) {
    context.stderr(`demo: could not start: ${(error as Error).message}`);
    return 1;
  }
  try {
    printHeader(demo, await rulesLoaded(demo.world.engineUrl), context);
    const failures = await playStory(demo, context);
    if (failures > 0) context.stdout(paint.red(`${plural(failures, 'expected effect')} did not happen (see ✗ above)`));
    else context.stdout(paint.green('Everything the example rules promise happened at the service.'));
    if (once || options.untilStopped === undefined) return failures > 0 ? 1 : 0;
    context.stdout('');
    printWhereToLook(demo, context);
    await options.untilStopped();
    context.stdout('\nstopping the engine and the simulator …');
    return 0;
  } catch (error) {
    context.stderr(`demo: ${(error as Error).message}`);
    return 1;
  } finally {
    await demo.close();
  }
}

export async function main(): Promise<void> {
  // `npm run demo | head` closes the pipe early: carry on quietly, so both servers still close and the temp dir goes.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
  const untilStopped = () =>
    new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
  process.exitCode = await runDemo(process.argv.slice(2), processContext(), { untilStopped });
  // Both servers are closed; should a stray handle (a pool, a timer) linger, leave anyway,
  // but late enough for stdout to drain where it is asynchronous.
  setTimeout(() => process.exit(), 1000).unref();
}

if (isEntryFile(import.meta.url)) await main();
