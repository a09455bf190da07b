/**
 * Environment → simulator options for `npm run simulator`, validated once. A bad
 * value stops start-up with a message naming the variable; the webhook secret's
 * value is never part of any message.
 */
import type { SignatureScheme } from '../intake/signature.js';
import type { SimulatorOptions } from './simulator.core.js';

export class SimulatorConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'SimulatorConfigError';
  }
}

type Env = Record<string, string | undefined>;

const PLAN_BUDGETS = { pro: 1000, enterprise: 10_000 } as const;

function value(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === '' ? undefined : raw;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) {
    throw new SimulatorConfigError(name, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

function errorRate(env: Env): number {
  const raw = value(env, 'SIMULATOR_ERROR_RATE');
  if (raw === undefined) return 0;
  const n = Number(raw);
  if (!/^\d*\.?\d+$/.test(raw) || n > 1) {
    throw new SimulatorConfigError('SIMULATOR_ERROR_RATE', `must be a number from 0 to 1, got "${raw}"`);
  }
  return n;
}

function webhookUrl(env: Env): string {
  const raw = value(env, 'WEBHOOK_URL') ?? 'http://127.0.0.1:3000/webhooks';
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  // Deliveries use node:http only, so an https address could never be reached.
  if (url?.protocol !== 'http:') throw new SimulatorConfigError('WEBHOOK_URL', `must be an http:// URL, got "${raw}"`);
  return raw;
}

function scheme(env: Env): SignatureScheme {
  const raw = value(env, 'WEBHOOK_SIGNATURE_SCHEME') ?? 'hmac-sha256';
  if (raw !== 'hmac-sha256' && raw !== 'timestamped') {
    throw new SimulatorConfigError('WEBHOOK_SIGNATURE_SCHEME', `must be hmac-sha256 or timestamped, got "${raw}"`);
  }
  return raw;
}

function rateLimit(env: Env): number {
  const plan = (value(env, 'SERVICE_PLAN') ?? 'pro').toLowerCase();
  if (plan !== 'pro' && plan !== 'enterprise') {
    throw new SimulatorConfigError('SERVICE_PLAN', `must be pro or enterprise, got "${plan}"`);
  }
  return integer(env, 'SIMULATOR_RATE_LIMIT_PER_MINUTE', PLAN_BUDGETS[plan], 1, 10_000_000);
}

/** The engine's WEBHOOK_SECRET may list several secrets (rotation); the service signs with the first. */
function secret(env: Env): string | undefined {
  const raw = value(env, 'WEBHOOK_SECRET');
  return raw?.split(',').map((s) => s.trim()).find((s) => s !== '');
}

export function simulatorOptionsFromEnv(env: Env): SimulatorOptions {
  return {
    port: integer(env, 'SIMULATOR_PORT', 4010, 0, 65_535),
    host: value(env, 'HOST') ?? '127.0.0.1',
    webhookUrl: webhookUrl(env),
    webhookSecret: secret(env),
    signatureScheme: scheme(env),
    rateLimitPerMinute: rateLimit(env),
    errorRate: errorRate(env),
    latencyMs: integer(env, 'SIMULATOR_LATENCY_MS', 0, 0, 600_000),
    workflowRunDelayMs: integer(env, 'SIMULATOR_WORKFLOW_RUN_DELAY_MS', 50, 0, 600_000),
  };
}

/** The one start-up line; credentials in the webhook URL are not repeated. */
export function describeListening(url: string, options: SimulatorOptions): string {
  const target = options.webhookUrl === undefined ? undefined : new URL(options.webhookUrl);
  if (target) {
    target.username = '';
    target.password = '';
  }
  const webhooks =
    target && options.webhookSecret !== undefined
      ? `webhooks → ${target.href} (${options.signatureScheme ?? 'hmac-sha256'})`
      : 'webhooks off';
  return `Service simulator listening on ${url} (${webhooks}; ${options.rateLimitPerMinute ?? 1000} requests/min; control at ${new URL(url).origin}/_sim)`;
}
