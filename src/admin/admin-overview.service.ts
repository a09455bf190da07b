/**
 * What the console's overview shows: work waiting, the service's rate budget,
 * loops blocked, failed action runs, and the last hour minute by minute (events
 * by status, action runs by outcome). Every query is bounded by an index: the
 * last hour's events are found by a binary search on `seq` (events are numbered
 * as received), finished action runs by (status, next_attempt_at), which a
 * finished run holds at the time it finished.
 */
import { Inject, Injectable } from '@nestjs/common';
import { ServiceClient } from '../actions/service-client.js';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import { WorkQueue } from '../processing/work-queue.js';
import { RuleRegistry } from '../rules/rule-registry.service.js';

const MINUTES = 60;
const FINISHED_RUNS = ['succeeded', 'failed', 'skipped'];

export interface MinuteCounts {
  /** The minute, `YYYY-MM-DDTHH:MM` (UTC). */
  minute: string;
  counts: Record<string, number>;
}

/** The 60 minutes up to `now`, oldest first, each with the counts found for it (zero elsewhere). */
export function minuteSeries(now: Date, rows: Array<{ minute: string; status: string; n: number | string }>): MinuteCounts[] {
  const series: MinuteCounts[] = [];
  const last = Math.floor(now.getTime() / 60_000) * 60_000;
  const byMinute = new Map<string, MinuteCounts>();
  for (let i = MINUTES - 1; i >= 0; i--) {
    const entry = { minute: new Date(last - i * 60_000).toISOString().slice(0, 16), counts: {} };
    series.push(entry);
    byMinute.set(entry.minute, entry);
  }
  for (const row of rows) {
    const entry = byMinute.get(row.minute);
    if (entry) entry.counts[row.status] = (entry.counts[row.status] ?? 0) + Number(row.n);
  }
  return series;
}

/**
 * The smallest seq in [low, high] whose `at` is at or after `since`, given that
 * `at` grows with seq; high + 1 when none. `atOf` reads one row by seq or the next one after it.
 */
export async function firstSeqSince(
  low: number,
  high: number,
  since: string,
  atOf: (seq: number) => Promise<{ seq: number; at: string } | undefined>,
): Promise<number> {
  let answer = high + 1;
  while (low <= high) {
    const middle = Math.floor((low + high) / 2);
    const row = await atOf(middle);
    if (row === undefined || row.seq > high) {
      high = middle - 1;
    } else if (row.at >= since) {
      answer = row.seq;
      high = middle - 1;
    } else {
      low = row.seq + 1;
    }
  }
  return answer;
}

@Injectable()
export class AdminOverviewService {
  constructor(
    private readonly db: Database,
    private readonly queue: WorkQueue,
    private readonly client: ServiceClient,
    private readonly registry: RuleRegistry,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  async overview() {
    const now = this.clock.now();
    const since = new Date(now.getTime() - MINUTES * 60_000).toISOString();
    const [depths, totals, events, runs] = await Promise.all([this.queue.depths(), this.totals(), this.eventRows(since), this.runRows(since)]);
    const pausedUntil = this.client.budget.pausedUntil();
    return {
      now: now.toISOString(),
      dry_run: this.config.dryRun,
      rules: { loaded: this.registry.all().length, enabled: this.registry.all().filter((r) => r.enabled).length, file_problems: this.registry.problems.length },
      queues: depths,
      rate_budget: {
        limit_per_minute: this.config.rateLimitPerMinute,
        remaining_in_window: this.client.budget.remaining(),
        last_ratelimit_remaining: this.client.lastRemaining ?? null,
        paused_until: pausedUntil === undefined ? null : new Date(pausedUntil).toISOString(),
      },
      loops_blocked: { last_hour: sum(events, 'loop_blocked'), retained: totals.loopBlocked, max_chain_depth: this.config.maxChainDepth },
      failed_action_runs: totals.failedRuns,
      events_per_minute: minuteSeries(now, events),
      action_runs_per_minute: minuteSeries(now, runs),
    };
  }

  private async totals(): Promise<{ loopBlocked: number; failedRuns: number }> {
    const [row] = await queryRows<{ loops: number | string; failed: number | string }>(
      this.db.manager,
      `SELECT (SELECT COUNT(*) FROM events WHERE status = 'loop_blocked') AS loops,
              (SELECT COUNT(*) FROM action_runs WHERE status = 'failed') AS failed`,
    );
    return { loopBlocked: Number(row?.loops ?? 0), failedRuns: Number(row?.failed ?? 0) };
  }

  private async eventRows(since: string) {
    const manager = this.db.manager;
    const [bounds] = await queryRows<{ low: number | null; high: number | null }>(manager, 'SELECT MIN(seq) AS low, MAX(seq) AS high FROM events');
    if (bounds?.low == null || bounds.high == null) return [];
    const first = await firstSeqSince(Number(bounds.low), Number(bounds.high), since, async (seq) => {
      const [row] = await queryRows<{ seq: number; received_at: string }>(manager, 'SELECT seq, received_at FROM events WHERE seq >= ? ORDER BY seq LIMIT 1', [seq]);
      return row && { seq: Number(row.seq), at: row.received_at };
    });
    return queryRows<{ minute: string; status: string; n: number | string }>(
      manager,
      `SELECT SUBSTR(received_at, 1, 16) AS minute, status, COUNT(*) AS n FROM events
       WHERE seq >= ? AND received_at >= ? GROUP BY SUBSTR(received_at, 1, 16), status`,
      [first, since],
    );
  }

  private runRows(since: string) {
    return queryRows<{ minute: string; status: string; n: number | string }>(
      this.db.manager,
      `SELECT SUBSTR(updated_at, 1, 16) AS minute, status, COUNT(*) AS n FROM action_runs
       WHERE status IN (${FINISHED_RUNS.map(() => '?').join(', ')}) AND next_attempt_at >= ? AND updated_at >= ?
       GROUP BY SUBSTR(updated_at, 1, 16), status`,
      [...FINISHED_RUNS, since, since],
    );
  }
}

function sum(rows: Array<{ status: string; n: number | string }>, status: string): number {
  return rows.filter((r) => r.status === status).reduce((total, r) => total + Number(r.n), 0);
}
