/**
 * Prometheus metrics (SPEC section 9). One registry per application instance,
 * so several engines in one process (tests) do not share counters.
 */
import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

@Injectable()
export class Metrics {
  readonly registry = new Registry();
  private readonly storageFailuresSeen = new Map<string, number>();

  readonly eventsReceived = new Counter({
    name: 'engine_events_received_total',
    help: 'Webhook and injected events by type (a known type, else other) and intake outcome (accepted, duplicate, or the error code)',
    labelNames: ['type', 'outcome'],
    registers: [this.registry],
  });
  readonly eventsProcessed = new Counter({
    name: 'engine_events_processed_total',
    help: 'Events evaluated, by type (a known type, else other) and final status',
    labelNames: ['type', 'status'],
    registers: [this.registry],
  });
  readonly ruleMatches = new Counter({
    name: 'engine_rule_matches_total',
    help: 'Rules that matched an event, by rule and outcome (matched, throttled)',
    labelNames: ['rule', 'outcome'],
    registers: [this.registry],
  });
  readonly actionRuns = new Counter({
    name: 'engine_action_runs_total',
    help: 'Action run attempts by action type and outcome',
    labelNames: ['type', 'outcome'],
    registers: [this.registry],
  });
  readonly actionDuration = new Histogram({
    name: 'engine_action_duration_seconds',
    help: 'Time of one request to the service, by action type',
    labelNames: ['type'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly loopsBlocked = new Counter({
    name: 'engine_loops_blocked_total',
    help: 'Events not evaluated because their chain of engine-caused events reached MAX_CHAIN_DEPTH',
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'engine_queue_depth',
    help: 'Work waiting: events not yet evaluated, action runs not yet finished',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly storageFailures = new Counter({
    name: 'engine_storage_failures_total',
    help: 'Writes the database refused, by kind (disk_full, read_only, io_error, unreachable)',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly rateLimitRemaining = new Gauge({
    name: 'engine_service_ratelimit_remaining',
    help: 'The last X-RateLimit-Remaining the service sent',
    registers: [this.registry],
  });
  readonly replicaInfo = new Gauge({
    name: 'engine_replica_info',
    help: 'This engine process (replica): its id (the lease owner), host and version; always 1',
    labelNames: ['replica', 'host', 'version'],
    registers: [this.registry],
  });
  readonly replicas = new Gauge({
    name: 'engine_replicas',
    help: 'Replicas registered on the database, by status (alive, dead, stopped), as of this replica\'s last heartbeat',
    labelNames: ['status'],
    registers: [this.registry],
  });

  eventReceived(type: string, outcome: string): void {
    this.eventsReceived.inc({ type: bounded(type), outcome });
  }

  eventProcessed(type: string, status: string): void {
    this.eventsProcessed.inc({ type: bounded(type), status });
  }

  ruleMatched(rule: string, outcome: string): void {
    this.ruleMatches.inc({ rule, outcome });
  }

  /** The database layer counts refused writes itself; a scrape copies its counts here. */
  storageFailed(counts: ReadonlyMap<string, number>): void {
    for (const [kind, total] of counts) {
      const seen = this.storageFailuresSeen.get(kind) ?? 0;
      if (total > seen) this.storageFailures.inc({ kind }, total - seen);
      this.storageFailuresSeen.set(kind, total);
    }
  }

  actionRun(type: string, outcome: string, seconds?: number): void {
    this.actionRuns.inc({ type, outcome });
    if (seconds !== undefined) this.actionDuration.observe({ type }, seconds);
  }
}

/**
 * The event types that get a label value of their own: the service's (SPEC
 * section 8), the engine's (sections 6 and 11), and `unknown`, which intake
 * uses when a request failed before its type was read. Event types come from
 * senders, so any other type counts as `other`: a label value per type would
 * let a sender grow the number of series without bound.
 */
export const METRIC_EVENT_TYPES: readonly string[] = [
  'task.created',
  'task.updated',
  'task.completed',
  'project.created',
  'user.invited',
  'workflow.run.completed',
  'schedule.fired',
  'engine.action_run.failed',
  'engine.event.loop_blocked',
  'unknown',
];

const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set(METRIC_EVENT_TYPES);

function bounded(type: string): string {
  return KNOWN_EVENT_TYPES.has(type) ? type : 'other';
}
