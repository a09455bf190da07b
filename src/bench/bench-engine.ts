/**
 * The engine under test. By default it runs as `node dist/main.js` in a child
 * process, configured only through the environment like a deployment: on a
 * 2-core machine the engine and the load generator then each get an event loop
 * (and, mostly, a core) of their own, and the engine's RSS is its own. The
 * in-process layout exists to compare against, and for machines where
 * spawning is awkward.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cleanup } from './bench-cleanup.js';
import type { Layout } from './bench-options.js';

export const BENCH_SECRET = 'whsec_bench_secret_0123456789';
const BENCH_API_KEY = 'ac_test_bench_key_0123456789';
const BENCH_ADMIN_TOKEN = 'bench_admin_token_0123456789';

/**
 * The one rule loaded: it listens to every task event and evaluates a
 * condition for each, but only matches the end-to-end run's events (titles
 * starting "Bench"), which it answers with one task.create carrying the event
 * id, so the simulator's request log can be joined back to the webhook.
 */
export const BENCH_RULE = {
  id: 'bench-follow-up',
  name: 'Benchmark: follow up on bench tasks',
  on: 'task.*',
  conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'startsWith', value: 'Bench' }] },
  actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Follow-up {{ event.id }}' } }],
};

export interface EngineMemory {
  rssMb: number;
  /** Peak RSS over the process's life (VmHWM); undefined in process, where it would include the load generator. */
  peakRssMb?: number;
}

export interface BenchEngine {
  url: string;
  layout: Layout;
  memory(): EngineMemory;
  /** CPU time (user + system) the engine has used so far; in process this includes the load generator. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

export interface EngineSettings {
  layout: Layout;
  databaseUrl: string;
  serviceUrl: string;
  /** Folder for a V8 CPU profile of the engine (child layout only). */
  profileDir?: string;
}

function engineEnv(settings: EngineSettings, port: number, rulesDir: string): Record<string, string> {
  return {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: settings.databaseUrl,
    RULES_DIR: rulesDir,
    WEBHOOK_SECRET: BENCH_SECRET,
    WEBHOOK_SIGNATURE_SCHEME: 'hmac-sha256',
    SERVICE_API_URL: settings.serviceUrl,
    SERVICE_API_KEY: BENCH_API_KEY,
    SERVICE_RATE_LIMIT_PER_MINUTE: '1000000',
    DRY_RUN: 'false',
    ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    LOG_LEVEL: 'warn',
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function writeRules(cleanup: Cleanup): string {
  const dir = mkdtempSync(join(tmpdir(), 'engine-bench-rules-'));
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'bench-rule.json'), JSON.stringify(BENCH_RULE, null, 2));
  return dir;
}

async function waitUntilReady(url: string, failed: () => string | undefined, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = failed();
    if (why !== undefined) throw new Error(why);
    const ok = await fetch(`${url}/health/ready`).then((r) => r.ok, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`engine at ${url} was not ready after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`));
  return line ? Number(/(\d+)/.exec(line)?.[1] ?? 0) / 1024 : 0;
}

/** utime + stime from /proc/<pid>/stat, in clock ticks of 1/100 s (USER_HZ on Linux). */
function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** SIGTERM lets the engine finish work in hand and close the database; SIGKILL if it hangs. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (!(await waitForExit(child, 15_000))) {
    child.kill('SIGKILL');
    await waitForExit(child, 5_000);
  }
}

async function startChild(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  const port = await freePort();
  const env = engineEnv(settings, port, writeRules(cleanup));
  const main = fileURLToPath(new URL('../main.js', import.meta.url));
  const nodeArgs = settings.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${settings.profileDir}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, main], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  cleanup.trackChild(child);
  const stop = cleanup.add(`stop engine (pid ${child.pid})`, () => stopChild(child));
  // The last lines only: enough to say why it failed, without growing during a long run.
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 50) output.shift();
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  const exited = () => (child.exitCode !== null || child.signalCode !== null ? `engine exited (${child.exitCode ?? child.signalCode}):\n${output.join('')}` : undefined);
  await waitUntilReady(url, exited);
  return {
    url,
    layout: 'child',
    memory: () => ({ rssMb: procStatusMb(child.pid!, 'VmRSS'), peakRssMb: procStatusMb(child.pid!, 'VmHWM') }),
    cpuSeconds: () => procCpuSeconds(child.pid!),
    stop,
  };
}

async function startInProcess(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  // Loaded only in this layout, so the default one keeps Nest out of the load generator's process.
  const [{ createApp, stopApp }, { loadConfig }] = await Promise.all([import('../app.js'), import('../config/config.js')]);
  const config = loadConfig(engineEnv(settings, 0, writeRules(cleanup)), () => BENCH_ADMIN_TOKEN);
  const app = await createApp(config); // logs at LOG_LEVEL=warn, like the child
  const stop = cleanup.add('stop in-process engine', () => stopApp(app));
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${port}`;
  await waitUntilReady(url, () => undefined);
  return {
    url,
    layout: 'in-process',
    memory: () => ({ rssMb: process.memoryUsage().rss / 1_048_576 }),
    cpuSeconds: () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1e6;
    },
    stop,
  };
}

export function startEngine(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  return settings.layout === 'child' ? startChild(settings, cleanup) : startInProcess(settings, cleanup);
}

export function describeLayout(layout: Layout): string {
  return layout === 'child' ? 'engine in child process' : 'engine in the load generator\'s process';
}
