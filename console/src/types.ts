/** The admin API's answers, as the console reads them (the OpenAPI document at /docs-json is the reference). */

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export type EventStatus = 'received' | 'processed' | 'ignored' | 'failed' | 'loop_blocked';

export interface EventSummary {
  id: string;
  type: string;
  status: EventStatus;
  source: string;
  resource: string | null;
  depth: number;
  attempts: number;
  received_at: string;
  processed_at: string | null;
  replay_of: string | null;
  error: string | null;
}

export interface ConditionResult {
  fact: string;
  path?: string;
  params?: Record<string, unknown>;
  operator: string;
  value: unknown;
  factValue?: unknown;
  result: boolean;
  group: string;
  skipped?: boolean;
  error?: string;
}

export interface RuleExplanation {
  rule: string;
  ruleVersion?: string;
  outcome: 'matched' | 'not_matched' | 'error' | 'ignored_self_caused' | 'throttled';
  matched?: boolean;
  conditions?: ConditionResult[];
  error?: string;
  execution?: string;
  note?: string;
}

export interface ServiceRequest {
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
}

export interface ActionRun {
  id: string;
  execution_id: string;
  rule: string;
  position: number;
  action_id: string | null;
  type: string;
  status: 'pending' | 'running' | 'succeeded' | 'retrying' | 'failed' | 'skipped';
  attempts: number;
  next_attempt_at: string | null;
  request: ServiceRequest | null;
  response_status: number | null;
  response: unknown;
  error: { code: string; message: string } | null;
  created_at: string;
  updated_at: string;
}

export interface Execution {
  id: string;
  event_id: string;
  rule: string;
  rule_version: string;
  status: 'running' | 'succeeded' | 'failed' | 'throttled' | 'skipped';
  error: string | null;
  conditions: ConditionResult[];
  created_at: string;
  finished_at: string | null;
  actions?: ActionRun[];
}

export interface EventDetail extends EventSummary {
  payload: unknown;
  rules: RuleExplanation[];
  executions: Execution[];
}

export interface AttemptRecord {
  started_at: string;
  duration_ms: number;
  outcome: 'ok' | 'http' | 'network' | 'timeout';
  status: number | null;
  error: { code: string; message: string } | null;
  retry_after: string | null;
}

export interface ChainLink {
  event_id: string;
  type?: string;
  status?: string;
  action_run: string;
  action_type: string;
  rule: string;
  at: string;
}

export type WaitingReason =
  | { kind: 'evaluating'; lease_until: string }
  | { kind: 'postponed'; until: string; attempts: number; error: string | null }
  | { kind: 'behind_event'; event_id: string; resource: string }
  | { kind: 'behind_action_runs'; resource: string; runs: Array<{ id: string; type: string; status: string; rule: string; event_id: string; next_attempt_at: string }> }
  | { kind: 'causal_barrier'; runs: Array<{ id: string; type: string; rule: string; created_at: string }> }
  | { kind: 'queued' };

export interface Throttle {
  execution: string;
  rule: string;
  key: string | null;
  limit: number | null;
  window_seconds: number | null;
}

export interface EventContext {
  id: string;
  self_caused: boolean;
  depth: number;
  max_chain_depth: number;
  dry_run: boolean;
  caused_by: ChainLink | null;
  caused: ChainLink[];
  waiting: WaitingReason[];
  throttled: Throttle[];
  attempts: Record<string, AttemptRecord[] | null>;
}

export interface RuleSummary {
  id: string;
  name: string | null;
  source: 'file' | 'api';
  path?: string;
  enabled: boolean;
  priority: number;
  triggers: string[];
  schedule?: { cron: string; timezone?: string };
  version: string;
  counts: { matched: number; succeeded: number; failed: number };
  last_matched_at: string | null;
}

export interface RuleDetail extends RuleSummary {
  definition: Record<string, unknown>;
  file_problems?: Problem[];
  note?: string;
}

export interface Problem {
  path: string;
  message: string;
}

export interface FileProblem extends Problem {
  file: string;
}

export interface TestResult {
  rule: string;
  version: string;
  enabled: boolean;
  listens: boolean;
  matched: boolean;
  conditions: ConditionResult[];
  error?: string;
  ignored?: string;
  actions: Array<{ id?: string; type: string; request?: ServiceRequest; error?: { code: string; message: string } }>;
}

export interface BacktestReport {
  events: Array<{
    event: { id: string; type: string; received_at: string; status: string };
    would_match: Array<{ rule: string; actions: TestResult['actions'] }>;
    matched_then: Array<{ rule: string; rule_version: string; status: string }>;
    differences: { newly_matched: string[]; no_longer_matched: string[] };
    errors?: Array<{ rule: string; error: string }>;
    ignored?: Array<{ rule: string; reason: string }>;
  }>;
  summary: { events: number; would_match: number; matched_then: number; differing: number; rules: Record<string, { would_match: number; matched_then: number }> };
  notes: string[];
}

export interface MinuteCounts {
  minute: string;
  counts: Record<string, number>;
}

export interface Overview {
  now: string;
  dry_run: boolean;
  rules: { loaded: number; enabled: number; file_problems: number };
  queues: { events: number; actions: number };
  rate_budget: { limit_per_minute: number; remaining_in_window: number; last_ratelimit_remaining: number | null; paused_until: string | null };
  loops_blocked: { last_hour: number; retained: number; max_chain_depth: number };
  failed_action_runs: number;
  events_per_minute: MinuteCounts[];
  action_runs_per_minute: MinuteCounts[];
}
