/**
 * `npm run bench` options, from flags first and the environment second, so a CI
 * job can set BENCH_* once and a person can override one run from the command line.
 */
export type Section = 'intake' | 'e2e' | 'matching';
export type Layout = 'child' | 'in-process';

export interface BenchOptions {
  sections: Section[];
  quick: boolean;
  /** Intake: how long the timed run lasts, and at most how many events it sends. */
  durationS: number;
  maxEvents: number;
  connections: number;
  /** End to end: a fixed, moderate rate, far below the intake's ceiling. */
  e2eRate: number;
  e2eDurationS: number;
  matchingRuleCounts: number[];
  matchingEvents: number;
  layout: Layout;
  /** undefined: try the local server, and skip PostgreSQL quietly when it does not answer. */
  postgresUrl: string | undefined;
  postgresRequired: boolean;
  postgresDisabled: boolean;
  /** Write a V8 CPU profile of the engine process (child layout) to this folder. */
  profile: boolean;
  resultsFile: string;
}

export class BenchUsageError extends Error {}

export const USAGE = `usage: npm run bench -- [--quick] [--only intake|e2e|matching[,…]] [--connections N]
                         [--duration SECONDS] [--events N] [--layout child|in-process] [--profile]
environment: BENCH_DURATION_S, BENCH_CONNECTIONS, BENCH_EVENTS, BENCH_E2E_RATE, BENCH_E2E_DURATION_S,
             BENCH_LAYOUT, BENCH_POSTGRES_URL (or BENCH_POSTGRES=off), BENCH_RESULTS`;

const SECTIONS: readonly Section[] = ['intake', 'e2e', 'matching'];
const DEFAULT_POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';

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

export function parseBenchOptions(argv: readonly string[], env: Env): BenchOptions | 'help' {
  const flags = parseFlags(argv);
  if (flags.has('help')) return 'help';
  const known = ['quick', 'only', 'connections', 'duration', 'events', 'layout', 'profile'];
  for (const name of flags.keys()) if (!known.includes(name)) throw new BenchUsageError(`unknown option --${name}`);
  const quick = flags.has('quick') || env.BENCH_QUICK === '1';
  const postgresSetting = env.BENCH_POSTGRES?.toLowerCase();
  return {
    sections: sections(flags.get('only') ?? env.BENCH_ONLY),
    quick,
    durationS: positive('duration', flags.get('duration') ?? env.BENCH_DURATION_S, quick ? 2 : 10),
    maxEvents: Math.floor(positive('events', flags.get('events') ?? env.BENCH_EVENTS, quick ? 30_000 : 200_000)),
    connections: Math.floor(positive('connections', flags.get('connections') ?? env.BENCH_CONNECTIONS, 50)),
    e2eRate: positive('BENCH_E2E_RATE', env.BENCH_E2E_RATE, 200),
    e2eDurationS: positive('BENCH_E2E_DURATION_S', env.BENCH_E2E_DURATION_S, quick ? 1 : 5),
    matchingRuleCounts: [10, 1_000, 10_000],
    matchingEvents: quick ? 2_000 : 20_000,
    layout: layout(flags.get('layout') ?? env.BENCH_LAYOUT),
    postgresUrl: env.BENCH_POSTGRES_URL ?? (postgresSetting === 'off' ? undefined : DEFAULT_POSTGRES),
    postgresRequired: env.BENCH_POSTGRES_URL !== undefined,
    postgresDisabled: postgresSetting === 'off' || postgresSetting === '0',
    profile: flags.has('profile'),
    resultsFile: env.BENCH_RESULTS ?? 'bench/results/latest.json',
  };
}
