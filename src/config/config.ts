/**
 * Environment → one typed, validated configuration object, read once at boot
 * (SPEC section 2). A bad value stops start-up with a message naming the variable;
 * the message never repeats a secret's value.
 */

export type ServicePlan = 'pro' | 'enterprise';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** How the service signs webhooks (SPEC section 4). */
export type SignatureScheme = 'hmac-sha256' | 'timestamped';

export interface EngineConfig {
  port: number;
  host: string;
  databaseUrl: string;
  rulesDir: string;
  serviceApiUrl: string;
  serviceApiKey: string | undefined;
  servicePlan: ServicePlan;
  rateLimitPerMinute: number;
  serviceTimeoutMs: number;
  dryRun: boolean;
  webhookSecrets: string[];
  webhookSignatureScheme: SignatureScheme;
  webhookToleranceSeconds: number;
  webhookMaxBytes: number;
  adminToken: string;
  /** True when ADMIN_TOKEN was not set and the token was generated at boot. */
  adminTokenGenerated: boolean;
  actionMaxAttempts: number;
  maxChainDepth: number;
  /** MAX_FOREACH_ITEMS: a forEach action over more items fails with too_many_items before any request. */
  maxForEachItems: number;
  retentionDays: number;
  logLevel: LogLevel;
  /** How often this replica writes its heartbeat and looks for replicas whose heartbeat stopped. */
  replicaHeartbeatMs: number;
  /** A replica not seen to heartbeat for this long is dead: its work is taken over. */
  replicaDeadAfterMs: number;
}

/** Injection token for the configuration object. */
export const ENGINE_CONFIG = Symbol('EngineConfig');

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

const PLAN_BUDGETS: Record<ServicePlan, number> = { pro: 1000, enterprise: 10000 };

function value(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  if (!/^-?\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  const lower = raw.toLowerCase() as T;
  if (!allowed.includes(lower)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return lower;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function databaseUrl(env: Env): string {
  const raw = value(env, 'DATABASE_URL') ?? 'sqlite:./data/engine.sqlite';
  if (raw === 'sqlite::memory:' || /^sqlite:.+/.test(raw) || /^postgres(ql)?:\/\/.+/.test(raw)) return raw;
  // The value may carry a password, so it is not repeated.
  throw new ConfigError('DATABASE_URL', 'must be sqlite:PATH, sqlite::memory: or postgres://… (the value given is none of these)');
}

function serviceApiUrl(env: Env): string {
  const raw = value(env, 'SERVICE_API_URL') ?? 'http://127.0.0.1:4010/v1';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('SERVICE_API_URL', 'must be an http(s) URL (the value given is not a URL)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('SERVICE_API_URL', `must be an http(s) URL, not ${url.protocol}`);
  }
  if (url.username || url.password) {
    throw new ConfigError('SERVICE_API_URL', 'must not carry credentials: the key goes in SERVICE_API_KEY');
  }
  // Requests go to exactly one /v1, whether or not the configured address ends with it.
  const path = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${url.origin}${path}/v1`;
}

function apiKey(env: Env): string | undefined {
  const raw = value(env, 'SERVICE_API_KEY');
  if (raw === undefined) return undefined;
  if (!/^ac_(live|test)_\S+$/.test(raw)) {
    throw new ConfigError('SERVICE_API_KEY', 'must start with ac_live_ (production) or ac_test_ (sandbox)');
  }
  return raw;
}

function adminToken(env: Env, generate: () => string): { token: string; generated: boolean } {
  const raw = value(env, 'ADMIN_TOKEN');
  if (raw === undefined) return { token: generate(), generated: true };
  if (raw.length < 16) throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters long');
  return { token: raw, generated: false };
}

function replicaTimings(env: Env): { replicaHeartbeatMs: number; replicaDeadAfterMs: number } {
  const replicaHeartbeatMs = integer(env, 'REPLICA_HEARTBEAT_MS', 1_000, 100, 60_000);
  const replicaDeadAfterMs = integer(env, 'REPLICA_DEAD_AFTER_MS', 5_000, 200, 600_000);
  if (replicaDeadAfterMs <= replicaHeartbeatMs) {
    throw new ConfigError('REPLICA_DEAD_AFTER_MS', `must be greater than REPLICA_HEARTBEAT_MS (${replicaHeartbeatMs}), got ${replicaDeadAfterMs}`);
  }
  return { replicaHeartbeatMs, replicaDeadAfterMs };
}

export function loadConfig(env: Env, generateToken: () => string): EngineConfig {
  const key = apiKey(env);
  const plan = oneOf(env, 'SERVICE_PLAN', ['pro', 'enterprise'] as const, 'pro');
  const secrets = (value(env, 'WEBHOOK_SECRET') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const admin = adminToken(env, generateToken);
  const dryRun = boolean(env, 'DRY_RUN', key === undefined);
  if (!dryRun && key === undefined) {
    throw new ConfigError('DRY_RUN', 'is false but SERVICE_API_KEY is not set: the engine cannot call the service');
  }
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: value(env, 'HOST') ?? '0.0.0.0',
    databaseUrl: databaseUrl(env),
    rulesDir: value(env, 'RULES_DIR') ?? './rules',
    serviceApiUrl: serviceApiUrl(env),
    serviceApiKey: key,
    servicePlan: plan,
    rateLimitPerMinute: integer(env, 'SERVICE_RATE_LIMIT_PER_MINUTE', PLAN_BUDGETS[plan], 1, 1_000_000),
    serviceTimeoutMs: integer(env, 'SERVICE_TIMEOUT_MS', 10_000, 100, 600_000),
    dryRun,
    webhookSecrets: secrets,
    webhookSignatureScheme: oneOf(env, 'WEBHOOK_SIGNATURE_SCHEME', ['hmac-sha256', 'timestamped'] as const, 'hmac-sha256'),
    webhookToleranceSeconds: integer(env, 'WEBHOOK_TOLERANCE_SECONDS', 300, 1, 86_400),
    webhookMaxBytes: integer(env, 'WEBHOOK_MAX_BYTES', 1_048_576, 1, 100 * 1_048_576),
    adminToken: admin.token,
    adminTokenGenerated: admin.generated,
    actionMaxAttempts: integer(env, 'ACTION_MAX_ATTEMPTS', 8, 1, 100),
    maxChainDepth: integer(env, 'MAX_CHAIN_DEPTH', 5, 1, 100),
    maxForEachItems: integer(env, 'MAX_FOREACH_ITEMS', 100, 1, 10_000),
    retentionDays: integer(env, 'RETENTION_DAYS', 30, 1, 36_500),
    logLevel: oneOf(env, 'LOG_LEVEL', ['debug', 'info', 'warn', 'error'] as const, 'info'),
    ...replicaTimings(env),
  };
}

/** Every secret value in the configuration, for the log redactor. */
export function secretsOf(config: EngineConfig): string[] {
  return [config.serviceApiKey, config.adminToken, ...config.webhookSecrets].filter(
    (s): s is string => s !== undefined && s.length > 0,
  );
}
