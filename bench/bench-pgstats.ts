/**
 * What the engine costs PostgreSQL, per event: transactions and rows from
 * `pg_stat_database`, the write-ahead log the server wrote (`pg_stat_wal`),
 * how many of the engine's row updates were HOT, and the CPU of the server
 * processes serving the engine's database (from /proc, when the server runs
 * on this machine).
 *
 * Backends send their statistics to `pg_stat_database` at most once a second
 * while busy and some seconds after going idle, but always when they exit. So
 * the counters are read before the engine starts and after it has stopped and
 * every backend of its database has gone: the difference is exact, and includes
 * the engine's start-up (migrations, rule loading), which the benchmark
 * measures once on its own and subtracts. Every query here but one runs on
 * the server's maintenance database (the one in BENCH_POSTGRES_URL), never on
 * the measured one, so the benchmark's own reading is not counted; the one,
 * `hotUpdates`, reads table statistics, which each database keeps for itself,
 * after everything else has been read.
 */
import { existsSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { waitUntil } from '../test/support/wait.js';
import { procCpuSeconds } from './bench-engine.js';

export interface PgCounters {
  /** xact_commit + xact_rollback. */
  transactions: number;
  /** tup_returned + tup_fetched: rows read by scans, and rows fetched through indexes. */
  rowsRead: number;
  /** tup_inserted + tup_updated + tup_deleted. */
  rowsWritten: number;
  /**
   * Bytes of write-ahead log the whole server wrote (`pg_stat_wal`, PostgreSQL 14 and later; 0 before). Not per
   * database: while the benchmark measures, the engine's database is the only one written to.
   */
  walBytes: number;
}

const COUNTERS_SQL = `SELECT xact_commit + xact_rollback AS transactions, tup_returned + tup_fetched AS rows_read,
  tup_inserted + tup_updated + tup_deleted AS rows_written FROM pg_stat_database WHERE datname = $1`;
const WAL_SQL = 'SELECT wal_bytes FROM pg_stat_wal';
const BACKENDS_SQL = 'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()';
/** The tables whose rows the engine updates for every event (the event, its execution, its action run). */
export const UPDATED_TABLES = ['events', 'executions', 'action_runs'];
const UPDATES_SQL = `SELECT COALESCE(SUM(n_tup_upd), 0) AS updates, COALESCE(SUM(n_tup_hot_upd), 0) AS hot
  FROM pg_stat_user_tables WHERE relname = ANY($1::text[])`;

/** Each counter of `a` (and of `b`, when given) through `f`. */
export function mapCounters(f: (a: number, b: number) => number, a: PgCounters, b?: PgCounters): PgCounters {
  return {
    transactions: f(a.transactions, b?.transactions ?? 0),
    rowsRead: f(a.rowsRead, b?.rowsRead ?? 0),
    rowsWritten: f(a.rowsWritten, b?.rowsWritten ?? 0),
    walBytes: f(a.walBytes, b?.walBytes ?? 0),
  };
}

export function subtract(a: PgCounters, b: PgCounters): PgCounters {
  return mapCounters((x, y) => x - y, a, b);
}

/** Row updates of UPDATED_TABLES, and how many of them were HOT (no index entry written, the new version on the same page). */
export interface HotUpdates {
  updates: number;
  hot: number;
}

async function withClient<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** 0 where the server has no `pg_stat_wal` (before PostgreSQL 14). */
async function readWalBytes(client: pg.Client): Promise<number> {
  return client.query<{ wal_bytes: string }>(WAL_SQL).then(
    (result) => Number(result.rows[0]?.wal_bytes ?? 0),
    () => 0,
  );
}

async function readCounters(client: pg.Client, database: string): Promise<PgCounters> {
  const row = (await client.query<Record<string, string>>(COUNTERS_SQL, [database])).rows[0];
  const walBytes = await readWalBytes(client);
  if (row === undefined) return { transactions: 0, rowsRead: 0, rowsWritten: 0, walBytes };
  return { transactions: Number(row.transactions), rowsRead: Number(row.rows_read), rowsWritten: Number(row.rows_written), walBytes };
}

/**
 * The row updates of UPDATED_TABLES since the database was made, and how many were HOT. Table statistics live in
 * each database, so this one query runs on the measured database itself: read it after the engine has stopped and
 * settledCounters has been read, so that it counts in nothing measured.
 */
export async function hotUpdates(serverUrl: string, database: string): Promise<HotUpdates> {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return withClient(url.toString(), async (client) => {
    const row = (await client.query<{ updates: string; hot: string }>(UPDATES_SQL, [UPDATED_TABLES])).rows[0];
    return { updates: Number(row?.updates ?? 0), hot: Number(row?.hot ?? 0) };
  });
}

/** The database's counters once no backend is connected to it (each flushed its statistics as it exited). */
export function settledCounters(serverUrl: string, database: string): Promise<PgCounters> {
  return withClient(serverUrl, async (client) => {
    const noBackends = async () => (await client.query(BACKENDS_SQL, [database])).rowCount === 0;
    await waitUntil(noBackends, { timeoutMs: 15_000, intervalMs: 50, what: `the backends of ${database} to exit` });
    // A backend leaves pg_stat_activity just before it flushes: read until two readings agree.
    let last = await readCounters(client, database);
    for (let i = 0; i < 20; i++) {
      await delay(100);
      const now = await readCounters(client, database);
      if (now.transactions === last.transactions && now.rowsRead === last.rowsRead) return now;
      last = now;
    }
    return last;
  });
}

/**
 * CPU used by the backends of one database (client backends and autovacuum
 * workers), sampled every 250 ms; a backend that exits between two samples
 * loses at most its last 250 ms. Undefined when the server's processes are not
 * visible here (a server on another machine or in another container).
 */
export class BackendCpu {
  private readonly baseline = new Map<number, number>();
  private readonly latest = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();
  private visible = true;
  private readonly client: pg.Client;

  constructor(serverUrl: string, private readonly database: string) {
    this.client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 2000 });
  }

  async start(): Promise<void> {
    await this.client.connect();
    await this.sample(true);
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample(false)).catch(() => undefined);
    }, 250);
  }

  /** CPU-seconds used since start(). */
  seconds(): number | undefined {
    if (!this.visible) return undefined;
    let total = 0;
    for (const [pid, cpu] of this.latest) total += cpu - (this.baseline.get(pid) ?? 0);
    return total;
  }

  async stop(): Promise<number | undefined> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample(false).catch(() => undefined);
    await this.client.end().catch(() => undefined);
    return this.seconds();
  }

  private async sample(first: boolean): Promise<void> {
    const pids = (await this.client.query<{ pid: number }>(BACKENDS_SQL, [this.database])).rows.map((r) => r.pid);
    for (const pid of pids) {
      if (!existsSync(`/proc/${pid}/stat`)) {
        this.visible = false;
        continue;
      }
      try {
        const cpu = procCpuSeconds(pid);
        if (first) this.baseline.set(pid, cpu);
        this.latest.set(pid, cpu);
      } catch {
        // Exited meanwhile: its last sample stands.
      }
    }
  }
}
