/**
 * The engine under test, started by the end-to-end tests' own helpers
 * (test/support/engine.ts). By default it runs as `node dist-bench/src/main.js`
 * (the engine compiled with the benchmark, from the same sources) in a child
 * process, configured only through the environment like a deployment: on a
 * 2-core machine the engine and the load generator then each get an event loop
 * (and, mostly, a core) of their own, and the engine's RSS is its own. The
 * in-process layout exists to compare against, and for machines where
 * spawning is awkward.
 */
import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { rulesDir, spawnEngine, startEngine as startTestEngine, type EngineProcess } from '../test/support/engine.js';
import { freePort } from '../test/support/round-trip.js';
import { waitUntil } from '../test/support/wait.js';
import type { Cleanup } from './bench-cleanup.js';
import type { Layout } from './bench-options.js';

export const BENCH_SECRET = 'whsec_bench_secret_0123456789';
const BENCH_API_KEY = 'ac_test_bench_key_0123456789';
const BENCH_ADMIN_TOKEN = 'bench_admin_token_0123456789';

/** The engine built beside the benchmark (bench/tsconfig.json compiles src/main.ts into dist-bench/src/). */
const ENGINE_MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

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

/** The whole configuration, so nothing of the tests' defaults applies (PORT and HOST come from the starter). */
function benchEnv(settings: EngineSettings, rules: string): Record<string, string | undefined> {
  return {
    DATABASE_URL: settings.databaseUrl,
    RULES_DIR: rules,
    WEBHOOK_SECRET: BENCH_SECRET,
    WEBHOOK_SIGNATURE_SCHEME: 'hmac-sha256',
    SERVICE_API_URL: settings.serviceUrl,
    SERVICE_API_KEY: BENCH_API_KEY,
    SERVICE_RATE_LIMIT_PER_MINUTE: '1000000',
    SERVICE_TIMEOUT_MS: undefined, // the engine's default, as a deployment has it
    DRY_RUN: 'false',
    ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    LOG_LEVEL: 'warn',
  };
}

function writeRules(cleanup: Cleanup): string {
  const dir = rulesDir([BENCH_RULE]);
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** /health answers as soon as the engine listens; /health/ready once its rules are loaded too. */
function untilReady(url: string): Promise<unknown> {
  const ready = () => fetch(`${url}/health/ready`).then((r) => r.ok);
  return waitUntil(ready, { timeoutMs: 30_000, intervalMs: 100, what: `the engine at ${url} to be ready` });
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

/** SIGTERM lets the engine finish work in hand and close the database; SIGKILL if it hangs. */
async function stopChild(engine: EngineProcess): Promise<void> {
  const exits = (signal: NodeJS.Signals, ms: number) =>
    Promise.race([engine.kill(signal).then(() => true), delay(ms, false, { ref: false })]);
  if (!(await exits('SIGTERM', 15_000))) await exits('SIGKILL', 5_000);
}

async function startChild(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  const nodeArgs = settings.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${settings.profileDir}`] : [];
  // Tracked from the start, so Ctrl-C while it boots still ends it.
  const onSpawn = cleanup.trackChild.bind(cleanup);
  const engine = await spawnEngine(benchEnv(settings, writeRules(cleanup)), await freePort(), { script: ENGINE_MAIN, nodeArgs, onSpawn });
  const pid = engine.child.pid!;
  const stop = cleanup.add(`stop engine (pid ${pid})`, () => stopChild(engine));
  await untilReady(engine.url);
  return {
    url: engine.url,
    layout: 'child',
    memory: () => ({ rssMb: procStatusMb(pid, 'VmRSS'), peakRssMb: procStatusMb(pid, 'VmHWM') }),
    cpuSeconds: () => procCpuSeconds(pid),
    stop,
  };
}

async function startInProcess(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  const engine = await startTestEngine(benchEnv(settings, writeRules(cleanup)));
  const stop = cleanup.add('stop in-process engine', () => engine.stop());
  await untilReady(engine.url);
  return {
    url: engine.url,
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
