import * as fc from 'fast-check';
import {
  backoffDelayMs,
  decideAfterFailure,
  MAX_BACKOFF_MS,
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  type Failure,
} from './retry-policy.js';

const NOW = new Date('2024-05-06T10:00:00.000Z');
const low = () => 0;
const high = () => 0.999999;
const middle = () => 0.5;

describe('retry policy', () => {
  describe(parseRetryAfter.name, () => {
    it.each<[string | undefined, number | undefined]>([
      ['120', 120_000],
      ['0', 0],
      [' 5 ', 5_000],
      ['1.5', 1_500],
      ['-3', 0],
      ['Mon, 06 May 2024 10:00:30 GMT', 30_000],
      ['Monday, 06-May-24 10:01:00 GMT', 60_000],
      ['Mon May  6 10:00:10 2024', 10_000],
      ['Mon, 06 May 2024 09:00:00 GMT', 0],
      [undefined, undefined],
      ['', undefined],
      ['soon', undefined],
      ['foo 12', undefined],
      ['12s', undefined],
      ['2024-05-06T10:00:30Z', undefined],
      ['Mon, 99 May 2024 10:00:30 GMT', undefined],
    ])('reads %j as %j ms', (header, expected) => {
      expect(parseRetryAfter(header, NOW)).toBe(expected);
    });
  });

  describe(backoffDelayMs.name, () => {
    it.each([
      [1, low, 500],
      [1, high, 1_000],
      [2, middle, 1_500],
      [3, high, 4_000],
      [9, high, 256_000],
      [10, high, MAX_BACKOFF_MS],
      [10, low, MAX_BACKOFF_MS / 2],
      [1_000, high, MAX_BACKOFF_MS],
      [0, high, 1_000],
      [-5, high, 1_000],
    ])('attempt %d gives %j → %d ms', (attempt, random, expected) => {
      expect(backoffDelayMs(attempt, random)).toBe(expected);
    });

    it('treats a broken random source as 0', () => {
      expect(backoffDelayMs(1, () => Number.NaN)).toBe(500);
      expect(backoffDelayMs(1, () => 7)).toBe(1_000);
    });

    it('stays within [0, 5 min] for any attempt and random value', () => {
      fc.assert(
        fc.property(fc.integer({ min: -10, max: 10_000 }), fc.double({ noNaN: false }), (attempt, value) => {
          const delay = backoffDelayMs(attempt, () => value);
          return Number.isInteger(delay) && delay >= 0 && delay <= MAX_BACKOFF_MS;
        }),
        { numRuns: 5_000 },
      );
    });
  });

  describe(decideAfterFailure.name, () => {
    const http = (status: number, extra: Partial<Failure> = {}): Failure => ({ kind: 'http', status, ...extra });

    describe('retries transient failures with backoff', () => {
      it.each<[string, Failure]>([
        ['a network error', { kind: 'network' }],
        ['a timeout', { kind: 'timeout' }],
        ['408', http(408)],
        ['425', http(425)],
        ['500', http(500)],
        ['502', http(502)],
        ['503', http(503)],
        ['599', http(599)],
      ])('%s', (_name, failure) => {
        expect(decideAfterFailure(failure, 2, 5, NOW, high)).toEqual({ retry: true, delayMs: 2_000 });
      });
    });

    describe('honours Retry-After on 429', () => {
      it.each<[string, string | undefined, number]>([
        ['as seconds', '7', 7_000],
        ['as an HTTP date', 'Mon, 06 May 2024 10:00:42 GMT', 42_000],
        ['in the past', 'Mon, 06 May 2024 09:59:00 GMT', 0],
        ['absent: backoff', undefined, 4_000],
        ['unreadable: backoff', 'later', 4_000],
        ['absurdly long: capped', '999999999', MAX_RETRY_AFTER_MS],
      ])('%s', (_name, retryAfter, delayMs) => {
        expect(decideAfterFailure(http(429, { retryAfter }), 3, 5, NOW, high)).toEqual({ retry: true, delayMs });
      });
    });

    describe('fails other statuses at once', () => {
      it.each([400, 401, 403, 404, 409, 410, 422, 302, 600])('%d', (status) => {
        const decision = decideAfterFailure(http(status), 1, 5, NOW, high);
        expect(decision).toEqual({ retry: false, reason: `HTTP ${status} is not retryable` });
      });

      it('keeps the service error code and message in the reason', () => {
        const failure = http(422, { code: 'validation_failed', message: 'title is required' });
        expect(decideAfterFailure(failure, 1, 5, NOW, high)).toEqual({
          retry: false,
          reason: 'HTTP 422 (validation_failed: title is required) is not retryable',
        });
      });
    });

    describe('gives up once the attempts are used', () => {
      it.each<[string, Failure, number, number]>([
        ['a 503 on the last attempt', http(503), 5, 5],
        ['a 429 past the last attempt', http(429, { retryAfter: '1' }), 6, 5],
        ['a timeout with a single attempt allowed', { kind: 'timeout' }, 1, 1],
      ])('%s', (_name, failure, attempt, maxAttempts) => {
        const decision = decideAfterFailure(failure, attempt, maxAttempts, NOW, high);
        expect(decision.retry).toBe(false);
        expect(decision).toMatchObject({ reason: expect.stringContaining(`after ${attempt} of ${maxAttempts} attempts`) });
      });
    });

    it('never asks for a negative delay, nor more than the caps', () => {
      const failure = fc.oneof(
        fc.record({ kind: fc.constantFrom('network' as const, 'timeout' as const) }),
        fc.record({
          kind: fc.constant('http' as const),
          status: fc.integer({ min: 100, max: 599 }),
          retryAfter: fc.option(fc.oneof(fc.string(), fc.integer({ min: -1e6, max: 1e9 }).map(String)), { nil: undefined }),
        }),
      );
      fc.assert(
        fc.property(failure, fc.integer({ min: 1, max: 50 }), fc.double({ min: 0, max: 1 }), (f, attempt, value) => {
          const decision = decideAfterFailure(f, attempt, 100, NOW, () => value);
          if (!decision.retry) return true;
          const cap = f.kind === 'http' && f.status === 429 ? MAX_RETRY_AFTER_MS : MAX_BACKOFF_MS;
          return decision.delayMs >= 0 && decision.delayMs <= cap;
        }),
        { numRuns: 5_000 },
      );
    });
  });
});
