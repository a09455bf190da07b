/**
 * The engine under test, started by the end-to-end tests' own helpers
 * (test/support/engine.ts). By default it runs as `node dist-bench/bundle/main.js`
 * (the engine compiled with the benchmark, from the same sources, and bundled
 * as `npm start`'s is: scripts/build-engine.mjs) in a child
 * process, configured only through the environment like a deployment: on a
 * 2-core machine the engine and the load generator then each get an event loop
 * (and, mostly, a core) of their own, and the engine's RSS is its own. The
 * in-process layout exists to compare against, and for machines where
 * spawning is awkward.
 *
 * The reference server (reference-server.ts) is started the same way, always
 * as a child process, and measured the same way (CPU and memory from /proc).
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { engineNodeOptions } from '../src/config/heap-growth.js';
import { engineEnv, rulesDir, spawnEngine, startEngine as startTestEngine } from '../test/support/engine.js';
import { freePort } from '../test/support/ports.js';
import { waitUntil } from '../test/support/wait.js';
import type { Cleanup } from './bench-cleanup.js';
import type { Layout } from './bench-options.js';

export const BENCH_SECRET = 'whsec_bench_secret_0123456789';
const BENCH_API_KEY = 'ac_test_bench_key_0123456789';
const BENCH_ADMIN_TOKEN = 'bench_admin_token_0123456789';

/** The engine built beside the benchmark (bench/tsconfig.json compiles src/ into dist-bench/src/; bench/ensure-build.mjs bundles it). */
export const ENGINE_MAIN = fileURLToPath(new URL('../bundle/main.js', import.meta.url));
export const REFERENCE_MAIN = fileURLToPath(new URL('./reference-server.js', import.meta.url));
/** The in-memory flow engine (flow-engine.ts: Node-RED's runtime and one flow). */
export const FLOW_MAIN = fileURLToPath(new URL('./flow-engine.js', import.meta.url));

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

/**
 * BENCH_RULE with its follow-up created in another project: a new task of the events' project then never waits
 * behind the creates in flight there (the causal barrier, SPEC section 6), which under BENCH_RULE it nearly always
 * does. `npm run bench:instructions -- --elsewhere` counts that workload (a rule whose actions change other things
 * than the resources its events announce, as most do).
 */
export const BENCH_RULE_ELSEWHERE = {
  ...BENCH_RULE,
  actions: [{ type: 'task.create', params: { project_id: 'prj_elsewhere', title: 'Follow-up {{ event.id }}' } }],
};

export interface EngineMemory {
  rssMb: number;
  /** Peak RSS over the process's life (VmHWM); undefined in process, where it would include the load generator. */
  peakRssMb?: number;
}

export interface BenchEngine {
  url: string;
  layout: Layout;
  pid?: number;
  memory(): EngineMemory;
  /** CPU time (user + system) the engine has used so far; in process this includes the load generator. */
  cpuSeconds(): number;
  /** The same, split by kind and by thread (child processes only: in process the main thread is the load generator's too). */
  cpuSplit?(): CpuSplit;
  stop(): Promise<void>;
}

export interface EngineSettings {
  layout: Layout;
  databaseUrl: string;
  serviceUrl: string;
  /** Folder for a V8 CPU profile of the engine (child layout only). */
  profileDir?: string;
  /** A folder of rule files made by the caller (default: one with BENCH_RULE alone). */
  rulesDir?: string;
  /**
   * Wait this long for /health/ready instead of spawnEngine's 30 s for /health
   * (child layout): an engine with a large backlog may take longer to listen.
   */
  readyTimeoutMs?: number;
  /** Another build of the engine to run instead of ENGINE_MAIN (child layout; bench-pair.ts). */
  script?: string;
  /** Options for this engine's node instead of BENCH_ENGINE_NODE_ARGS (child layout; bench-pair.ts). */
  nodeArgs?: string[];
}

/** The whole configuration, so nothing of the tests' defaults applies (PORT and HOST come from the starter). */
export function benchEnv(settings: EngineSettings, rules: string): Record<string, string | undefined> {
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

export function writeRules(cleanup: Cleanup, rules: unknown[] = [BENCH_RULE]): string {
  const dir = rulesDir(rules);
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** /health answers as soon as the engine listens; /health/ready once its rules are loaded too. */
function untilReady(url: string): Promise<unknown> {
  const ready = () => fetch(url).then((r) => r.ok);
  return waitUntil(ready, { timeoutMs: 30_000, intervalMs: 100, what: `${url} to answer 200` });
}

export function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`));
  return line ? Number(/(\d+)/.exec(line)?.[1] ?? 0) / 1024 : 0;
}

/** utime and stime of a /proc `stat` file, in seconds (clock ticks of 1/100 s: USER_HZ on Linux). */
function userAndSystem(statFile: string): { user: number; system: number } {
  const stat = readFileSync(statFile, 'utf8');
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** utime + stime from /proc/<pid>/stat: every thread of the process, in seconds. */
export function procCpuSeconds(pid: number): number {
  const { user, system } = userAndSystem(`/proc/${pid}/stat`);
  return user + system;
}

/** CPU time so far, in seconds: the whole process's, and its main thread's (the event loop, for a Node process). */
export interface CpuSplit {
  user: number;
  system: number;
  mainUser: number;
  mainSystem: number;
}

/** The process from /proc/<pid>/stat, its main thread (whose id is the process's) from /proc/<pid>/task/<pid>/stat. */
export function procCpuSplit(pid: number): CpuSplit {
  const main = userAndSystem(`/proc/${pid}/task/${pid}/stat`);
  const all = userAndSystem(`/proc/${pid}/stat`);
  return { user: all.user, system: all.system, mainUser: main.user, mainSystem: main.system };
}

/** SIGTERM lets the engine finish work in hand and close the database; SIGKILL if it hangs. */
async function stopChild(engine: { kill(signal: NodeJS.Signals): Promise<void> }): Promise<void> {
  const exits = (signal: NodeJS.Signals, ms: number) =>
    Promise.race([engine.kill(signal).then(() => true), delay(ms, false, { ref: false })]);
  if (!(await exits('SIGTERM', 15_000))) await exits('SIGKILL', 5_000);
}

interface ChildSpec {
  what: string;
  script: string;
  env: Record<string, string | undefined>;
  nodeArgs: string[];
  /** Path answering 200 once the child can take load. */
  readyPath: string;
}

/** `read`, and once it throws (the process is gone), what it last returned. */
function lastSeen<T>(read: () => T, initial: T): () => T {
  let last = initial;
  return () => {
    try {
      last = read();
    } catch {
      // Gone: keep what was last seen.
    }
    return last;
  };
}

/** Memory and CPU of a child, read from /proc while it lives; the last values once it has exited. */
function procReader(pid: number) {
  const read = lastSeen(() => ({ rssMb: procStatusMb(pid, 'VmRSS'), peakRssMb: procStatusMb(pid, 'VmHWM'), cpu: procCpuSeconds(pid) }), { rssMb: 0, peakRssMb: 0, cpu: 0 });
  const split = lastSeen(() => procCpuSplit(pid), { user: 0, system: 0, mainUser: 0, mainSystem: 0 });
  return { memory: () => ({ rssMb: read().rssMb, peakRssMb: read().peakRssMb }), cpuSeconds: () => read().cpu, cpuSplit: split };
}

async function startChildProcess(spec: ChildSpec, cleanup: Cleanup): Promise<BenchEngine> {
  // Tracked from the start, so Ctrl-C while it boots still ends it.
  const onSpawn = cleanup.trackChild.bind(cleanup);
  const child = await spawnEngine(spec.env, await freePort(), { script: spec.script, nodeArgs: spec.nodeArgs, onSpawn });
  const pid = child.child.pid!;
  const stop = cleanup.add(`stop ${spec.what} (pid ${pid})`, () => stopChild(child));
  await untilReady(`${child.url}${spec.readyPath}`);
  return { url: child.url, layout: 'child', pid, ...procReader(pid), stop };
}

/**
 * What spawnEngine (test/support/engine.ts) does, with a wait of `timeoutMs`
 * for `readyPath` instead of its fixed 30 s for /health: only for start-ups
 * known to be slow (a large backlog waiting).
 */
async function startChildPatiently(spec: ChildSpec, cleanup: Cleanup, timeoutMs: number): Promise<BenchEngine> {
  const port = await freePort();
  const child = spawn(process.execPath, [...spec.nodeArgs, spec.script], {
    env: { ...process.env, ...engineEnv(spec.env), PORT: String(port) } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanup.trackChild(child);
  const output: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const kill = (signal: NodeJS.Signals) => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill(signal);
  });
  const stop = cleanup.add(`stop ${spec.what} (pid ${child.pid})`, () => stopChild({ kill }));
  const url = `http://127.0.0.1:${port}`;
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const ready = async () => exited() || (await fetch(`${url}${spec.readyPath}`).then((r) => r.ok, () => false));
  const outcome = await waitUntil(ready, { timeoutMs, intervalMs: 100, what: `${spec.what} at ${url}${spec.readyPath} to answer 200` }).catch((error: Error) => error);
  if (outcome instanceof Error || exited()) {
    await stop();
    throw new Error(`${spec.what} did not become ready (${outcome instanceof Error ? outcome.message : `exited with ${child.exitCode ?? child.signalCode}`}):\n${output.join('')}`);
  }
  return { url, layout: 'child', pid: child.pid, ...procReader(child.pid!), stop };
}

/** Space-separated options (BENCH_ENGINE_NODE_ARGS, bench-pair.ts's --a-args): none when unset or blank. */
export function splitArgs(text: string | undefined): string[] {
  return (text ?? '').split(/\s+/).filter((arg) => arg !== '');
}

function startChild(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  // As `npm start` runs it for its database; options given after these (BENCH_ENGINE_NODE_ARGS, bench:pair's) win.
  const nodeArgs = [...engineNodeOptions(settings.databaseUrl), ...(settings.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${settings.profileDir}`] : [])];
  // Options for the engine's node alone (V8 flags, a --require hook), not for the reference or the load generator.
  nodeArgs.push(...(settings.nodeArgs ?? splitArgs(process.env.BENCH_ENGINE_NODE_ARGS)));
  const env = benchEnv(settings, settings.rulesDir ?? writeRules(cleanup));
  const spec = { what: 'engine', script: settings.script ?? ENGINE_MAIN, env, nodeArgs, readyPath: '/health/ready' };
  return settings.readyTimeoutMs === undefined ? startChildProcess(spec, cleanup) : startChildPatiently(spec, cleanup, settings.readyTimeoutMs);
}

/** The reference server (reference-server.ts) on a SQLite file, sending its actions to `serviceUrl`. */
export function startReference(databaseFile: string, serviceUrl: string, cleanup: Cleanup): Promise<BenchEngine> {
  return startChildProcess({ what: 'reference server', script: REFERENCE_MAIN, env: referenceEnv(databaseFile, serviceUrl), nodeArgs: [], readyPath: '/health' }, cleanup);
}

/** The in-memory flow engine (flow-engine.ts), sending its actions to `serviceUrl`; it stores nothing. */
export function startFlowEngine(serviceUrl: string, cleanup: Cleanup): Promise<BenchEngine> {
  return startChildProcess({ what: 'in-memory flow engine', script: FLOW_MAIN, env: flowEnv(serviceUrl), nodeArgs: [], readyPath: '/health' }, cleanup);
}

/** The flow engine's configuration (flow-engine.ts reads only these, and PORT and HOST). */
export function flowEnv(serviceUrl: string): Record<string, string> {
  return { WEBHOOK_SECRET: BENCH_SECRET, SERVICE_API_URL: serviceUrl, SERVICE_API_KEY: BENCH_API_KEY };
}

/** The reference server's configuration (reference-server.ts reads only these, and PORT and HOST). */
export function referenceEnv(databaseFile: string, serviceUrl: string): Record<string, string> {
  return { DATABASE_FILE: databaseFile, WEBHOOK_SECRET: BENCH_SECRET, SERVICE_API_URL: serviceUrl, SERVICE_API_KEY: BENCH_API_KEY };
}

async function startInProcess(settings: EngineSettings, cleanup: Cleanup): Promise<BenchEngine> {
  const engine = await startTestEngine(benchEnv(settings, settings.rulesDir ?? writeRules(cleanup)));
  const stop = cleanup.add('stop in-process engine', () => engine.stop());
  await untilReady(`${engine.url}/health/ready`);
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
