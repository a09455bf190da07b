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
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';

/** Runs whose attempts are remembered; the oldest is forgotten first. */
const MAX_RUNS = 5_000;
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
  const started_at = startedAt.toISOString();
  const duration_ms = Math.round(durationMs);
  if (outcome.ok) return { started_at, duration_ms, outcome: 'ok', status: outcome.status, error: null, retry_after: null };
  const error = { code: outcome.code, message: outcome.message.slice(0, MAX_MESSAGE) };
  if (outcome.kind === 'http') return { started_at, duration_ms, outcome: 'http', status: outcome.status, error, retry_after: outcome.retryAfter ?? null };
  return { started_at, duration_ms, outcome: outcome.kind, status: null, error, retry_after: null };
}

@Injectable()
export class AttemptJournal {
  private readonly runs = new Map<string, AttemptRecord[]>();

  record(runId: string, attempt: AttemptRecord): void {
    let attempts = this.runs.get(runId);
    if (attempts) {
      this.runs.delete(runId); // re-inserted below: most recently used last
    } else {
      attempts = [];
      if (this.runs.size >= MAX_RUNS) this.runs.delete(this.runs.keys().next().value as string);
    }
    attempts.push(attempt);
    if (attempts.length > MAX_ATTEMPTS_PER_RUN) attempts.splice(1, 1);
    this.runs.set(runId, attempts);
  }

  /** The attempts remembered for a run, oldest first; undefined when this process has none. */
  attemptsOf(runId: string): AttemptRecord[] | undefined {
    return this.runs.get(runId);
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
