/**
 * `npm run bench` options, from flags first and the environment second, so a CI
 * job can set BENCH_* once and a person can override one run from the command line.
 */
import type { ConnectionMode } from './bench-load.js';

/**
 * intake: closed loop, events no rule matches; e2e: closed loop, every event
 * matching; open: half the reference's rate (SQLite also a quarter), open loop; backlog: drain rate with
 * a backlog waiting; startup: time to ready with many rule files; waiting:
 * memory, claim time and latency with many executions waiting on a delay.
 */
export type Section = 'intake' | 'e2e' | 'open' | 'backlog' | 'startup' | 'matching' | 'waiting';
export type Layout = 'child' | 'in-process';

export interface BenchOptions {
  sections: Section[];
  quick: boolean;
  /** Closed loops: how long each timed run sends, at most how many events it prepares (sized from the warm-up's rate), over how many connections. */
  durationS: number;
  /**
   * Closed loops: the reference server and the engine on each database run at once and take turns, each timed run cut
   * into this many slices sent in the order R S P P S R … (bench-interleaved.ts), so that all meet the same moments
   * of this shared machine; 1: each in turn, a fresh process for each, as before session 69.
   */
  slices: number;
  maxEvents: number;
  connections: number;
  /** Closed loops: keep-alive, a new connection per webhook, or both (one run each). */
  connectionModes: ConnectionMode[];
  /**
   * Warm-up before each timed run, under the same load (closed loops: as fast as answered; open loops: at the run's
   * rate): for `warmUpS` seconds, at most `warmUpEvents` events. V8 keeps compiling the engine's hot code for some
   * 10 s after it starts (the reference's, far smaller, in much less), so a full run measures steady state.
   */
  warmUpEvents: number;
  warmUpS: number;
  /** How long to wait, after sending stops, for the work acknowledged to be done. */
  drainLimitS: number;
  /** Open loop: a fixed rate (undefined: half the reference's closed-loop end-to-end rate of the same run). */
  openRate: number | undefined;
  openDurationS: number;
  /** Backlog run: events waiting before the engine starts, and how many of them are timed. */
  backlog: number;
  backlogMeasured: number;
  /** Waiting run: executions waiting on a three-day delay (bench-waiting.ts). */
  waiting: number;
  /** Start-up run: rule files loaded. */
  startupRules: number;
  matchingRuleCounts: number[];
  matchingEvents: number;
  layout: Layout;
  /** undefined: try the local server, and skip PostgreSQL quietly when it does not answer. */
  postgresUrl: string | undefined;
  postgresRequired: boolean;
  postgresDisabled: boolean;
  /** `--replicas N`: the end-to-end closed loop on PostgreSQL with 1 … N engine processes (bench-replicas.ts). */
  replicas: number | undefined;
  /** Write a V8 CPU profile of the engine process (child layout) to this folder. */
  profile: boolean;
  resultsFile: string;
}

export class BenchUsageError extends Error {}

export const USAGE = `usage: npm run bench -- [--quick] [--only intake|e2e|open|backlog|startup|matching|waiting[,…]]
                         [--connections N] [--seconds S] [--events N] [--connection keep-alive|per-event|both]
                         [--connection-per-event] [--slices N] [--open-rate N] [--backlog N] [--backlog-measured N]
                         [--rules N] [--waiting N] [--layout child|in-process] [--profile] [--replicas N]
--replicas N alone measures only 1 … N replicas on PostgreSQL (add --only … for other parts too)
environment: BENCH_DURATION_S, BENCH_SLICES, BENCH_CONNECTIONS, BENCH_EVENTS, BENCH_E2E_RATE, BENCH_E2E_DURATION_S,
             BENCH_BACKLOG, BENCH_WAITING, BENCH_LAYOUT, BENCH_POSTGRES_URL (or BENCH_POSTGRES=off), BENCH_RESULTS`;

const SECTIONS: readonly Section[] = ['intake', 'e2e', 'open', 'backlog', 'startup', 'waiting', 'matching'];
export const DEFAULT_POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';
/**
 * How long a full run also sends SQLite the half rate for (bench-e2e.ts), beside the `openDurationS` every open loop
 * sends for: the target's figure sustained (README, Performance: Targets).
 */
export const SUSTAINED_OPEN_LOOP_S = 20;
const KNOWN_FLAGS = [
  'quick', 'only', 'connections', 'seconds', 'duration', 'events', 'connection', 'connection-per-event',
  'backlog', 'backlog-measured', 'rules', 'open-rate', 'layout', 'profile', 'replicas', 'waiting', 'slices',
];

type Env = Readonly<Record<string, string | undefined>>;

/** `--name value` and `--name=value` both work; bare flags map to 'true'. */
function parseFlags(argv: readonly string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new BenchUsageError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    if (eq > 0) flags.set(arg.slice(2, eq), arg.slice(eq + 1));
    else if (argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) flags.set(arg.slice(2), argv[++i]);
    else flags.set(arg.slice(2), 'true');
  }
  return flags;
}

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new BenchUsageError(`${name} must be a positive number, got "${raw}"`);
  return n;
}

function sections(raw: string | undefined): Section[] {
  if (raw === undefined) return [...SECTIONS];
  const wanted = raw.split(',').map((s) => s.trim());
  for (const s of wanted) {
    if (!SECTIONS.includes(s as Section)) throw new BenchUsageError(`--only takes ${SECTIONS.join(', ')}; got "${s}"`);
  }
  return SECTIONS.filter((s) => wanted.includes(s));
}

function layout(raw: string | undefined): Layout {
  if (raw === undefined || raw === 'child') return 'child';
  if (raw === 'in-process') return raw;
  throw new BenchUsageError(`--layout takes child or in-process; got "${raw}"`);
}

/** The full run measures both; --quick keep-alive only. */
function connectionModes(flags: Map<string, string>, quick: boolean): ConnectionMode[] {
  const raw = flags.has('connection-per-event') ? 'per-event' : flags.get('connection');
  if (raw === undefined) return quick ? ['keep-alive'] : ['keep-alive', 'per-event'];
  if (raw === 'keep-alive' || raw === 'per-event') return [raw];
  if (raw === 'both') return ['keep-alive', 'per-event'];
  throw new BenchUsageError(`--connection takes keep-alive, per-event or both; got "${raw}"`);
}

function postgres(env: Env): Pick<BenchOptions, 'postgresUrl' | 'postgresRequired' | 'postgresDisabled'> {
  const setting = env.BENCH_POSTGRES?.toLowerCase();
  return {
    postgresUrl: env.BENCH_POSTGRES_URL ?? (setting === 'off' ? undefined : DEFAULT_POSTGRES),
    postgresRequired: env.BENCH_POSTGRES_URL !== undefined,
    postgresDisabled: setting === 'off' || setting === '0',
  };
}

function sizes(flags: Map<string, string>, env: Env, quick: boolean) {
  const int = (name: string, raw: string | undefined, full: number, short: number) => Math.floor(positive(name, raw, quick ? short : full));
  const openRate = flags.get('open-rate') ?? env.BENCH_E2E_RATE;
  return {
    durationS: positive('seconds', flags.get('seconds') ?? flags.get('duration') ?? env.BENCH_DURATION_S, quick ? 2 : 10),
    slices: int('slices', flags.get('slices') ?? env.BENCH_SLICES, 10, 2),
    maxEvents: int('events', flags.get('events') ?? env.BENCH_EVENTS, 500_000, 100_000),
    connections: int('connections', flags.get('connections') ?? env.BENCH_CONNECTIONS, 32, 32),
    warmUpEvents: quick ? 300 : 20_000,
    warmUpS: quick ? 2 : 10,
    drainLimitS: quick ? 3 : 10,
    openRate: openRate === undefined ? undefined : positive('BENCH_E2E_RATE', openRate, 1),
    openDurationS: positive('BENCH_E2E_DURATION_S', env.BENCH_E2E_DURATION_S, quick ? 1 : 5),
    backlog: int('backlog', flags.get('backlog') ?? env.BENCH_BACKLOG, 200_000, 10_000),
    backlogMeasured: int('backlog-measured', flags.get('backlog-measured'), 20_000, 2_000),
    startupRules: int('rules', flags.get('rules'), 1_000, 1_000),
    waiting: int('waiting', flags.get('waiting') ?? env.BENCH_WAITING, 100_000, 20_000),
  };
}

export function parseBenchOptions(argv: readonly string[], env: Env): BenchOptions | 'help' {
  const flags = parseFlags(argv);
  if (flags.has('help')) return 'help';
  for (const name of flags.keys()) if (!KNOWN_FLAGS.includes(name)) throw new BenchUsageError(`unknown option --${name}`);
  const quick = flags.has('quick') || env.BENCH_QUICK === '1';
  const replicas = flags.has('replicas') ? Math.floor(positive('replicas', flags.get('replicas'), 3)) : undefined;
  const only = flags.get('only') ?? env.BENCH_ONLY;
  const options: BenchOptions = {
    sections: replicas !== undefined && only === undefined ? [] : sections(only),
    replicas,
    quick,
    ...sizes(flags, env, quick),
    connectionModes: connectionModes(flags, quick),
    matchingRuleCounts: [10, 1_000, 10_000],
    matchingEvents: quick ? 2_000 : 20_000,
    layout: layout(flags.get('layout') ?? env.BENCH_LAYOUT),
    ...postgres(env),
    profile: flags.has('profile'),
    resultsFile: env.BENCH_RESULTS ?? 'bench/results/latest.json',
  };
  if (options.backlogMeasured > options.backlog) throw new BenchUsageError('--backlog-measured must not exceed --backlog');
  return options;
}
