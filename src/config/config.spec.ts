import { ConfigError, loadConfig, secretsOf, type EngineConfig } from './config.js';

const GENERATED = 'generated-admin-token-0123456789';
const API_KEY = 'ac_live_0123456789abcdefSECRET';
const generate = () => GENERATED;

function load(env: Record<string, string | undefined> = {}): EngineConfig {
  return loadConfig(env, generate);
}

/** The ConfigError that loading `env` throws (fails the test when nothing is thrown). */
function errorFrom(env: Record<string, string | undefined>): ConfigError {
  try {
    load(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe(loadConfig.name, () => {
  describe('defaults', () => {
    it('runs on the embedded defaults of SPEC section 2 with an empty environment', () => {
      expect(load({})).toEqual({
        port: 3000,
        host: '0.0.0.0',
        databaseUrl: 'sqlite:./data/engine.sqlite',
        rulesDir: './rules',
        serviceApiUrl: 'http://127.0.0.1:4010/v1',
        serviceApiKey: undefined,
        servicePlan: 'pro',
        rateLimitPerMinute: 1000,
        serviceTimeoutMs: 10_000,
        dryRun: true,
        webhookSecrets: [],
        webhookSignatureScheme: 'hmac-sha256',
        webhookToleranceSeconds: 300,
        webhookMaxBytes: 1_048_576,
        adminToken: GENERATED,
        adminTokenGenerated: true,
        actionMaxAttempts: 8,
        maxChainDepth: 5,
        maxForEachItems: 100,
        retentionDays: 30,
        logLevel: 'info',
        replicaHeartbeatMs: 1_000,
        replicaDeadAfterMs: 5_000,
      });
    });

    it('treats empty and blank values as unset', () => {
      const blank = { PORT: '', DATABASE_URL: ' ', SERVICE_API_KEY: '', DRY_RUN: '', ADMIN_TOKEN: '  ', SERVICE_PLAN: '' };
      expect(load(blank)).toEqual(load({}));
    });

    it('is not in dry-run when an API key is set', () => {
      expect(load({ SERVICE_API_KEY: API_KEY })).toMatchObject({ serviceApiKey: API_KEY, dryRun: false });
    });

    it('generates the admin token only when none is set', () => {
      let calls = 0;
      const config = loadConfig({ ADMIN_TOKEN: 'a-token-of-sixteen-chars' }, () => `token-${++calls}`);
      expect(config).toMatchObject({ adminToken: 'a-token-of-sixteen-chars', adminTokenGenerated: false });
      expect(calls).toBe(0);
    });
  });

  describe('values that are read', () => {
    it('reads every variable it is given', () => {
      const config = load({
        PORT: '8080',
        HOST: '127.0.0.1',
        DATABASE_URL: 'postgres://engine:pw@db:5432/engine',
        RULES_DIR: '/etc/engine/rules',
        SERVICE_API_URL: 'https://api.example.com/v1',
        SERVICE_API_KEY: 'ac_test_sandbox_key',
        SERVICE_TIMEOUT_MS: '2500',
        DRY_RUN: 'true',
        WEBHOOK_SIGNATURE_SCHEME: 'timestamped',
        WEBHOOK_TOLERANCE_SECONDS: '60',
        WEBHOOK_MAX_BYTES: '1024',
        ACTION_MAX_ATTEMPTS: '3',
        MAX_CHAIN_DEPTH: '2',
        RETENTION_DAYS: '7',
        LOG_LEVEL: 'debug',
      });
      expect(config).toMatchObject({
        port: 8080,
        host: '127.0.0.1',
        databaseUrl: 'postgres://engine:pw@db:5432/engine',
        rulesDir: '/etc/engine/rules',
        serviceApiUrl: 'https://api.example.com/v1',
        serviceApiKey: 'ac_test_sandbox_key',
        serviceTimeoutMs: 2500,
        dryRun: true,
        webhookSignatureScheme: 'timestamped',
        webhookToleranceSeconds: 60,
        webhookMaxBytes: 1024,
        actionMaxAttempts: 3,
        maxChainDepth: 2,
        retentionDays: 7,
        logLevel: 'debug',
      });
    });

    it.each([
      ['sqlite:./somewhere/engine.sqlite'],
      ['sqlite::memory:'],
      ['postgres://u:p@h:5432/db'],
      ['postgresql://h/db'],
    ])('accepts DATABASE_URL=%s', (url) => {
      expect(load({ DATABASE_URL: url }).databaseUrl).toBe(url);
    });

    it.each([
      ['true', true],
      ['TRUE', true],
      ['1', true],
      ['yes', true],
      ['false', false],
      ['0', false],
      ['No', false],
    ])('reads DRY_RUN=%s as %s (with a key set)', (raw, expected) => {
      expect(load({ SERVICE_API_KEY: API_KEY, DRY_RUN: raw }).dryRun).toBe(expected);
    });

    it('reads PORT with surrounding whitespace', () => {
      expect(load({ PORT: ' 8080 ' }).port).toBe(8080);
    });
  });

  describe('SERVICE_API_URL', () => {
    it.each([
      ['http://h:1', 'http://h:1/v1'],
      ['http://h:1/', 'http://h:1/v1'],
      ['http://h:1/v1', 'http://h:1/v1'],
      ['http://h:1/v1/', 'http://h:1/v1'],
      ['http://h:1/v1//', 'http://h:1/v1'],
      ['http://h:1/api', 'http://h:1/api/v1'],
      ['http://h:1/api/v1', 'http://h:1/api/v1'],
      ['https://api.example.com', 'https://api.example.com/v1'],
    ])('normalises %s to %s, with exactly one /v1', (raw, expected) => {
      expect(load({ SERVICE_API_URL: raw }).serviceApiUrl).toBe(expected);
    });
  });

  describe('the request budget', () => {
    it.each<[Record<string, string>, number]>([
      [{}, 1000],
      [{ SERVICE_PLAN: 'pro' }, 1000],
      [{ SERVICE_PLAN: 'enterprise' }, 10_000],
      [{ SERVICE_PLAN: 'Enterprise' }, 10_000],
      [{ SERVICE_PLAN: 'pro', SERVICE_RATE_LIMIT_PER_MINUTE: '250' }, 250],
      [{ SERVICE_PLAN: 'enterprise', SERVICE_RATE_LIMIT_PER_MINUTE: '20000' }, 20_000],
    ])('with %j is %i requests per minute', (env, budget) => {
      expect(load(env).rateLimitPerMinute).toBe(budget);
    });
  });

  describe('webhook secrets', () => {
    it.each<[string, string[]]>([
      ['one', ['one']],
      ['old,new', ['old', 'new']],
      [' old , new ', ['old', 'new']],
      ['old,,new,', ['old', 'new']],
      [',', []],
    ])('reads WEBHOOK_SECRET=%j as %j', (raw, secrets) => {
      expect(load({ WEBHOOK_SECRET: raw }).webhookSecrets).toEqual(secrets);
    });
  });

  describe('bad values', () => {
    it.each<[string, Record<string, string>]>([
      ['SERVICE_API_KEY', { SERVICE_API_KEY: 'abc' }],
      ['SERVICE_API_KEY', { SERVICE_API_KEY: 'ac_prod_0123456789' }],
      ['SERVICE_API_KEY', { SERVICE_API_KEY: 'ac_live_' }],
      ['SERVICE_PLAN', { SERVICE_PLAN: 'gold' }],
      ['PORT', { PORT: 'x' }],
      ['PORT', { PORT: '70000' }],
      ['PORT', { PORT: '-1' }],
      ['PORT', { PORT: '80.5' }],
      ['PORT', { PORT: '1e3' }],
      ['DATABASE_URL', { DATABASE_URL: 'mysql://root:hunter2@db/engine' }],
      ['DATABASE_URL', { DATABASE_URL: 'sqlite:' }],
      ['WEBHOOK_SIGNATURE_SCHEME', { WEBHOOK_SIGNATURE_SCHEME: 'hmac-sha1' }],
      ['WEBHOOK_TOLERANCE_SECONDS', { WEBHOOK_TOLERANCE_SECONDS: '0' }],
      ['WEBHOOK_MAX_BYTES', { WEBHOOK_MAX_BYTES: 'lots' }],
      ['DRY_RUN', { DRY_RUN: 'false' }],
      ['DRY_RUN', { DRY_RUN: 'maybe' }],
      ['DRY_RUN', { SERVICE_API_KEY: API_KEY, DRY_RUN: '2' }],
      ['ADMIN_TOKEN', { ADMIN_TOKEN: 'short' }],
      ['ADMIN_TOKEN', { ADMIN_TOKEN: '0123456789abcde' }],
      ['SERVICE_API_URL', { SERVICE_API_URL: 'not a url' }],
      ['SERVICE_API_URL', { SERVICE_API_URL: 'ftp://h/v1' }],
      ['SERVICE_RATE_LIMIT_PER_MINUTE', { SERVICE_RATE_LIMIT_PER_MINUTE: '0' }],
      ['SERVICE_TIMEOUT_MS', { SERVICE_TIMEOUT_MS: 'ten' }],
      ['ACTION_MAX_ATTEMPTS', { ACTION_MAX_ATTEMPTS: '0' }],
      ['MAX_CHAIN_DEPTH', { MAX_CHAIN_DEPTH: '1000' }],
      ['MAX_FOREACH_ITEMS', { MAX_FOREACH_ITEMS: '0' }],
      ['MAX_FOREACH_ITEMS', { MAX_FOREACH_ITEMS: 'lots' }],
      ['RETENTION_DAYS', { RETENTION_DAYS: '-30' }],
      ['LOG_LEVEL', { LOG_LEVEL: 'trace' }],
      ['REPLICA_HEARTBEAT_MS', { REPLICA_HEARTBEAT_MS: '1s' }],
      ['REPLICA_DEAD_AFTER_MS', { REPLICA_DEAD_AFTER_MS: '5000', REPLICA_HEARTBEAT_MS: '5000' }],
      ['REPLICA_DEAD_AFTER_MS', { REPLICA_DEAD_AFTER_MS: '900' }],
    ])('refuses a bad %s: %j', (variable, env) => {
      const error = errorFrom(env);
      expect(error.variable).toBe(variable);
      expect(error.message.startsWith(`${variable}: `)).toBe(true);
      expect(error.name).toBe('ConfigError');
    });

    it('explains that a replica is declared dead only after more than one heartbeat interval', () => {
      expect(errorFrom({ REPLICA_HEARTBEAT_MS: '2000', REPLICA_DEAD_AFTER_MS: '1500' }).message).toBe(
        'REPLICA_DEAD_AFTER_MS: must be greater than REPLICA_HEARTBEAT_MS (2000), got 1500',
      );
      expect(load({ REPLICA_HEARTBEAT_MS: '250', REPLICA_DEAD_AFTER_MS: '2000' })).toMatchObject({ replicaHeartbeatMs: 250, replicaDeadAfterMs: 2000 });
    });

    it('reads MAX_FOREACH_ITEMS, and says what it must be', () => {
      expect(load({ MAX_FOREACH_ITEMS: '250' }).maxForEachItems).toBe(250);
      expect(errorFrom({ MAX_FOREACH_ITEMS: '20000' }).message).toBe('MAX_FOREACH_ITEMS: must be between 1 and 10000, got 20000');
    });

    it('explains what SERVICE_API_KEY must look like', () => {
      expect(errorFrom({ SERVICE_API_KEY: 'abc' }).message).toMatch(/ac_live_.*ac_test_/);
    });

    it('does not repeat the password of a refused DATABASE_URL', () => {
      const { message } = errorFrom({ DATABASE_URL: 'mysql://root:hunter2@db/engine' });
      expect(message).not.toContain('hunter2');
      expect(message).not.toContain('root');
      expect(message).toContain('DATABASE_URL');
    });

    it.each([
      ['a malformed key', { SERVICE_API_KEY: 'sk_live_TOPSECRET123' }, 'sk_live_TOPSECRET123'],
      ['a key with a space', { SERVICE_API_KEY: 'ac_live_TOP SECRET' }, 'TOP SECRET'],
      ['a good key next to another bad value', { SERVICE_API_KEY: API_KEY, PORT: 'x' }, API_KEY],
      ['a good key next to a bad DRY_RUN', { SERVICE_API_KEY: API_KEY, DRY_RUN: 'nope' }, API_KEY],
      ['a good key next to a bad URL', { SERVICE_API_KEY: API_KEY, SERVICE_API_URL: 'nope' }, API_KEY],
    ])('never repeats the API key in its message (%s)', (_, env, secret) => {
      expect(errorFrom(env).message).not.toContain(secret);
    });

    it('does not repeat a short ADMIN_TOKEN', () => {
      expect(errorFrom({ ADMIN_TOKEN: 's3cr3t!' }).message).not.toContain('s3cr3t!');
    });
  });
});

describe(secretsOf.name, () => {
  it('lists the API key, the admin token and every webhook secret', () => {
    const config = load({ SERVICE_API_KEY: API_KEY, ADMIN_TOKEN: 'admin-token-0123456789', WEBHOOK_SECRET: 'old, new' });
    expect(secretsOf(config)).toEqual([API_KEY, 'admin-token-0123456789', 'old', 'new']);
  });

  it('leaves out what is not set', () => {
    expect(secretsOf(load({}))).toEqual([GENERATED]);
  });
});
