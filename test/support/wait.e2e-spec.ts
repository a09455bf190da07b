/** The one "poll until" (src/wait.ts), as the tests, the bench and the demo use it. */
import { waitUntil } from './wait.js';

describe('waitUntil', () => {
  describe('when the probe answers', () => {
    it('resolves with the first truthy result', async () => {
      let calls = 0;
      const answers = [undefined, null, false, 0, '', { ready: true }, { ready: 'later' }];
      await expect(waitUntil(() => answers[calls++], { intervalMs: 1 })).resolves.toEqual({ ready: true });
      expect(calls).toBe(6);
    });

    it('awaits a probe that returns a promise', async () => {
      let calls = 0;
      await expect(waitUntil(async () => (++calls >= 3 ? 'up' : undefined), { intervalMs: 1 })).resolves.toBe('up');
    });

    it('counts a probe that throws or rejects as not yet', async () => {
      let calls = 0;
      const probe = async () => {
        calls++;
        if (calls === 1) throw new Error('connection refused');
        if (calls === 2) return Promise.reject(new Error('reset'));
        return 'ready';
      };
      await expect(waitUntil(probe, { intervalMs: 1 })).resolves.toBe('ready');
    });

    it('probes at least once, even with no time to wait', async () => {
      await expect(waitUntil(() => 'at once', { timeoutMs: 0 })).resolves.toBe('at once');
    });
  });

  describe('when the probe never answers', () => {
    it('rejects after the timeout, naming what it waited for and the last value', async () => {
      const started = Date.now();
      const waiting = waitUntil(() => false, { timeoutMs: 80, intervalMs: 10, what: 'the engine to be ready' });
      await expect(waiting).rejects.toThrow('timed out after 80 ms waiting for the engine to be ready; last value: false');
      expect(Date.now() - started).toBeGreaterThanOrEqual(75);
    });

    it('names the last error when the probe kept throwing', async () => {
      let calls = 0;
      const probe = () => {
        throw new Error(`refused #${++calls}`);
      };
      await expect(waitUntil(probe, { timeoutMs: 30, intervalMs: 5 })).rejects.toThrow(
        new RegExp(`waiting for a condition; last error: refused #\\d+$`),
      );
      expect(calls).toBeGreaterThan(1);
    });
  });
});
