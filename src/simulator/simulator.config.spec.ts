import { describeListening, simulatorOptionsFromEnv } from './simulator.config.js';

describe(simulatorOptionsFromEnv.name, () => {
  describe('defaults', () => {
    it('listens on 127.0.0.1:4010 with the pro budget and webhooks to the local engine', () => {
      expect(simulatorOptionsFromEnv({})).toEqual({
        port: 4010,
        host: '127.0.0.1',
        webhookUrl: 'http://127.0.0.1:3000/webhooks',
        webhookSecret: undefined,
        signatureScheme: 'hmac-sha256',
        rateLimitPerMinute: 1000,
        errorRate: 0,
        latencyMs: 0,
        workflowRunDelayMs: 50,
      });
    });
  });

  describe('values', () => {
    it.each([
      [{ SERVICE_PLAN: 'enterprise' }, { rateLimitPerMinute: 10_000 }],
      [{ SERVICE_PLAN: 'enterprise', SIMULATOR_RATE_LIMIT_PER_MINUTE: '60' }, { rateLimitPerMinute: 60 }],
      [{ SIMULATOR_PORT: '0', HOST: '0.0.0.0' }, { port: 0, host: '0.0.0.0' }],
      [{ SIMULATOR_ERROR_RATE: '0.25', SIMULATOR_LATENCY_MS: '30' }, { errorRate: 0.25, latencyMs: 30 }],
      [{ WEBHOOK_SECRET: 'new, old', WEBHOOK_SIGNATURE_SCHEME: 'timestamped' }, { webhookSecret: 'new', signatureScheme: 'timestamped' }],
    ])('reads %j', (env, expected) => {
      expect(simulatorOptionsFromEnv(env)).toMatchObject(expected);
    });
  });

  describe('bad values', () => {
    it.each([
      ['SIMULATOR_PORT', '70000'],
      ['SIMULATOR_PORT', 'abc'],
      ['SERVICE_PLAN', 'free'],
      ['SIMULATOR_RATE_LIMIT_PER_MINUTE', '0'],
      ['SIMULATOR_ERROR_RATE', '1.5'],
      ['SIMULATOR_ERROR_RATE', '-0.1'],
      ['SIMULATOR_LATENCY_MS', '-5'],
      ['WEBHOOK_URL', 'https://engine.example/webhooks'],
      ['WEBHOOK_URL', 'not a url'],
      ['WEBHOOK_SIGNATURE_SCHEME', 'md5'],
    ])('names %s when it is "%s"', (variable, value) => {
      expect(() => simulatorOptionsFromEnv({ [variable]: value })).toThrow(new RegExp(`^${variable}: `));
    });
  });

  describe('start-up line', () => {
    it('says where it listens and never repeats the secret or URL credentials', () => {
      const options = simulatorOptionsFromEnv({
        WEBHOOK_SECRET: 'whsec_do_not_print',
        WEBHOOK_URL: 'http://user:pass@127.0.0.1:3000/webhooks',
      });
      const line = describeListening('http://127.0.0.1:4010/v1', options);
      expect(line).toContain('http://127.0.0.1:4010/v1');
      expect(line).toContain('http://127.0.0.1:3000/webhooks');
      expect(line).not.toMatch(/whsec_do_not_print|pass/);
    });

    it('says when webhooks are off', () => {
      expect(describeListening('http://127.0.0.1:4010/v1', simulatorOptionsFromEnv({}))).toContain('webhooks off');
    });
  });
});
