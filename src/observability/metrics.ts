/**
 * Prometheus metrics (SPEC section 9). One registry per application instance,
 * so several engines in one process (tests) do not share counters.
 */
import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Increments of a counter with two labels, kept by their values until the
 * counter is read: prom-client's `inc` sorts and joins the labels into a key
 * each time (about 2,000 instructions, four or five times an event end to
 * end), here two Map lookups. The counter adds them up when it is read
 * (`collect`, which prom-client calls before every read: a scrape, `get()`).
 */
class PairTally {
  private readonly counts = new Map<string, Map<string, number>>();

  constructor(private readonly names: readonly [string, string]) {}

  add(first: string, second: string): void {
    let seconds = this.counts.get(first);
    if (seconds === undefined) this.counts.set(first, (seconds = new Map()));
    seconds.set(second, (seconds.get(second) ?? 0) + 1);
  }

  /** A counter's `collect`: what was tallied since the last read, added to it. */
  collector(): (this: Counter<string>) => void {
    const [firstName, secondName] = this.names;
    const counts = this.counts;
    return function collect(this: Counter<string>) {
      for (const [first, seconds] of counts) {
        for (const [second, n] of seconds) this.inc({ [firstName]: first, [secondName]: second }, n);
      }
      counts.clear();
    };
  }
}

/** A counter labelled by two names whose increments are tallied (`PairTally`) until it is read. */
function tallied(registry: Registry, name: string, help: string, labelNames: readonly [string, string]): { counter: Counter<string>; tally: PairTally } {
  const tally = new PairTally(labelNames);
  const counter = new Counter({ name, help, labelNames, registers: [registry], collect: tally.collector() });
  return { counter, tally };
}

@Injectable()
export class Metrics {
  readonly registry = new Registry();
  private readonly storageFailuresSeen = new Map<string, number>();

  private readonly received = tallied(this.registry, 'engine_events_received_total',
    'Webhook and injected events by type (a known type, else other) and intake outcome (accepted, duplicate, or the error code)', ['type', 'outcome']);
  private readonly processed = tallied(this.registry, 'engine_events_processed_total',
    'Events evaluated, by type (a known type, else other) and final status', ['type', 'status']);
  private readonly matches = tallied(this.registry, 'engine_rule_matches_total',
    'Rules that matched an event, by rule and outcome (matched, throttled)', ['rule', 'outcome']);
  private readonly runs = tallied(this.registry, 'engine_action_runs_total', 'Action run attempts by action type and outcome', ['type', 'outcome']);
  readonly eventsReceived = this.received.counter;
  readonly eventsProcessed = this.processed.counter;
  readonly ruleMatches = this.matches.counter;
  readonly actionRuns = this.runs.counter;
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
    this.received.tally.add(bounded(type), outcome);
  }

  eventProcessed(type: string, status: string): void {
    this.processed.tally.add(bounded(type), status);
  }

  ruleMatched(rule: string, outcome: string): void {
    this.matches.tally.add(rule, outcome);
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
    this.runs.tally.add(type, outcome);
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
