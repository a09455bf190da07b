/**
 * Each attempt of each action run, as this process made it: when, how long,
 * and what the service answered. The database keeps an action run's last
 * attempt (its status, answer and error); the console's timeline needs the
 * earlier ones too. They are kept here, in memory, for the most recent runs,
 * by the service client the engine is composed with (JournaledServiceClient),
 * so the hot path writes nothing more to the database. What a restart or
 * another replica forgets, the console says it does not know.
 */
import { Inject, Injectable } from '@nestjs/common';
import { ServiceClient, type ServiceOutcome } from '../actions/service-client.js';
import type { ServiceRequest } from '../actions/service-operations.js';
import { CLOCK, isoOf, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';

/** Runs whose attempts are remembered at least (the most recently attempted; at most twice as many). */
export const MAX_RUNS = 5_000;
/** Attempts remembered per run (the first ones and the latest ones). */
const MAX_ATTEMPTS_PER_RUN = 50;
/** Characters kept of an error message. */
const MAX_MESSAGE = 1_000;

export interface AttemptRecord {
  started_at: string;
  duration_ms: number;
  /** `ok`, `http` (an error status), `network` or `timeout`. */
  outcome: 'ok' | 'http' | 'network' | 'timeout';
  status: number | null;
  error: { code: string; message: string } | null;
  retry_after: string | null;
}

/** One record per attempt of every action (the hot path): each written out as one literal, which V8 builds in one step. */
export function attemptRecord(outcome: ServiceOutcome, startedAt: Date, durationMs: number): AttemptRecord {
  const started_at = isoOf(startedAt);
  const duration_ms = Math.round(durationMs);
  if (outcome.ok) return { started_at, duration_ms, outcome: 'ok', status: outcome.status, error: null, retry_after: null };
  const error = { code: outcome.code, message: outcome.message.slice(0, MAX_MESSAGE) };
  if (outcome.kind === 'http') return { started_at, duration_ms, outcome: 'http', status: outcome.status, error, retry_after: outcome.retryAfter ?? null };
  return { started_at, duration_ms, outcome: outcome.kind, status: null, error, retry_after: null };
}

/**
 * The attempts of the runs attempted most recently, in two generations of at
 * most MAX_RUNS runs each: a run attempted again moves to the newer one, and
 * when the newer is full the older is forgotten whole. (One map that forgot its
 * oldest run at each new one found that run by walking past every entry it had
 * deleted since it last grew: 3.6 µs a run, about 1 % of the engine's work
 * under load.)
 */
@Injectable()
export class AttemptJournal {
  private newer = new Map<string, AttemptRecord[]>();
  private older = new Map<string, AttemptRecord[]>();

  record(runId: string, attempt: AttemptRecord): void {
    let attempts = this.newer.get(runId);
    if (attempts === undefined) {
      attempts = this.older.get(runId) ?? [];
      this.older.delete(runId);
      if (this.newer.size >= MAX_RUNS) {
        this.older = this.newer;
        this.newer = new Map();
      }
      this.newer.set(runId, attempts);
    }
    attempts.push(attempt);
    if (attempts.length > MAX_ATTEMPTS_PER_RUN) attempts.splice(1, 1);
  }

  /** The attempts remembered for a run, oldest first; undefined when this process has none. */
  attemptsOf(runId: string): AttemptRecord[] | undefined {
    return this.newer.get(runId) ?? this.older.get(runId);
  }
}

/**
 * The engine's service client, with each action attempt (a request sent with an
 * Idempotency-Key, which is the action run's id) written to the journal.
 * Lookups (no key) are not attempts of a run and are not recorded.
 */
@Injectable()
export class JournaledServiceClient extends ServiceClient {
  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly journalClock: Clock,
    private readonly journal: AttemptJournal,
  ) {
    super(config, journalClock);
  }

  override async send(request: ServiceRequest, idempotencyKey?: string): Promise<ServiceOutcome> {
    if (idempotencyKey === undefined) return super.send(request, idempotencyKey);
    const startedAt = this.journalClock.now();
    const started = performance.now();
    const outcome = await super.send(request, idempotencyKey);
    this.journal.record(idempotencyKey, attemptRecord(outcome, startedAt, performance.now() - started));
    return outcome;
  }
}
