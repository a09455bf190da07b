import * as fc from 'fast-check';
import { hmacHex, signBody, verifySignature, type SignatureScheme, type VerifyOptions } from './signature.js';

/** The published HMAC-SHA256 example vector, as the service documents it. */
const VECTOR = {
  secret: "It's a Secret to Everybody",
  body: Buffer.from('Hello, World!'),
  hex: '757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
};
const NOW = new Date('2024-05-06T10:00:00.000Z');
const NOW_SECONDS = Math.floor(NOW.getTime() / 1000);

function options(overrides: Partial<VerifyOptions> = {}): VerifyOptions {
  return { scheme: 'hmac-sha256', secrets: [VECTOR.secret], toleranceSeconds: 300, now: NOW, ...overrides };
}

function timestamped(overrides: Partial<VerifyOptions> = {}): VerifyOptions {
  return options({ scheme: 'timestamped', ...overrides });
}

/** A `timestamped` header for `body`, signed at `t` (unix seconds) with `secret`. */
function timestampedHeader(body: Buffer, t: number | string, secret = VECTOR.secret): string {
  return `t=${t},v1=${hmacHex(secret, Buffer.concat([Buffer.from(`${t}.`), body]))}`;
}

const ok = { ok: true };
const invalid = expect.objectContaining({ ok: false, code: 'invalid_signature' });
const missing = expect.objectContaining({ ok: false, code: 'missing_signature' });

describe(hmacHex.name, () => {
  it('reproduces the published vector', () => {
    expect(hmacHex(VECTOR.secret, VECTOR.body)).toBe(VECTOR.hex);
  });

  it('gives the same digest for a string and for its UTF-8 bytes', () => {
    expect(hmacHex(VECTOR.secret, 'Hello, World!')).toBe(VECTOR.hex);
  });
});

describe(signBody.name, () => {
  it('signs with the sha256= prefix by default', () => {
    expect(signBody(VECTOR.body, VECTOR.secret)).toBe(`sha256=${VECTOR.hex}`);
  });

  it('signs "<t>.<body>" in the timestamped scheme, t in whole seconds', () => {
    const at = new Date(NOW.getTime() + 999);
    expect(signBody(VECTOR.body, VECTOR.secret, 'timestamped', at)).toBe(timestampedHeader(VECTOR.body, NOW_SECONDS));
  });
});

describe(verifySignature.name, () => {
  describe('the hmac-sha256 scheme', () => {
    it.each([
      ['bare lowercase hex', VECTOR.hex],
      ['the sha256= prefix', `sha256=${VECTOR.hex}`],
      ['uppercase hex', VECTOR.hex.toUpperCase()],
      ['uppercase hex after the prefix', `sha256=${VECTOR.hex.toUpperCase()}`],
      ['surrounding whitespace', `  sha256=${VECTOR.hex}\t`],
    ])('accepts the published vector with %s', (_, header) => {
      expect(verifySignature(VECTOR.body, header, options())).toEqual(ok);
    });

    it.each([
      ['63 characters', VECTOR.hex.slice(0, 63)],
      ['65 characters', `${VECTOR.hex}0`],
      ['an empty value after the prefix', 'sha256='],
      ['a non-hex character', `${VECTOR.hex.slice(0, 63)}g`],
      ['a doubled prefix', `sha256=sha256=${VECTOR.hex}`],
      ['another prefix', `sha1=${VECTOR.hex}`],
      ['a timestamped header', timestampedHeader(VECTOR.body, NOW_SECONDS)],
      ['base64 instead of hex', Buffer.from(VECTOR.hex, 'hex').toString('base64')],
    ])('rejects a signature with %s', (_, header) => {
      expect(verifySignature(VECTOR.body, header, options())).toEqual(invalid);
    });

    it('rejects a signature made with another secret', () => {
      const header = signBody(VECTOR.body, 'another secret');
      expect(verifySignature(VECTOR.body, header, options())).toEqual(
        expect.objectContaining({ ok: false, code: 'invalid_signature', reason: 'signature does not match' }),
      );
    });

    it('rejects every signature when no secret is configured', () => {
      expect(verifySignature(VECTOR.body, VECTOR.hex, options({ secrets: [] }))).toEqual(invalid);
    });
  });

  describe('a missing signature', () => {
    it.each<[string, string | undefined]>([
      ['absent', undefined],
      ['empty', ''],
      ['blank', '   '],
    ])('is missing_signature when the header is %s, in both schemes', (_, header) => {
      expect(verifySignature(VECTOR.body, header, options())).toEqual(missing);
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(missing);
    });
  });

  describe('secret rotation', () => {
    it('accepts a signature made with the second of several secrets', () => {
      const header = signBody(VECTOR.body, VECTOR.secret);
      expect(verifySignature(VECTOR.body, header, options({ secrets: ['the-new-secret', VECTOR.secret] }))).toEqual(ok);
    });

    it('accepts a signature made with the first of several secrets', () => {
      const header = signBody(VECTOR.body, 'the-new-secret');
      expect(verifySignature(VECTOR.body, header, options({ secrets: ['the-new-secret', VECTOR.secret] }))).toEqual(ok);
    });

    it('rejects the old secret once it is removed from the list', () => {
      const header = signBody(VECTOR.body, VECTOR.secret);
      expect(verifySignature(VECTOR.body, header, options({ secrets: ['the-new-secret'] }))).toEqual(invalid);
    });

    it('accepts rotation in the timestamped scheme too', () => {
      const header = timestampedHeader(VECTOR.body, NOW_SECONDS, 'old');
      expect(verifySignature(VECTOR.body, header, timestamped({ secrets: ['new', 'old'] }))).toEqual(ok);
      expect(verifySignature(VECTOR.body, header, timestamped({ secrets: ['new'] }))).toEqual(invalid);
    });
  });

  describe('the timestamped scheme', () => {
    it('accepts a signature made now', () => {
      expect(verifySignature(VECTOR.body, timestampedHeader(VECTOR.body, NOW_SECONDS), timestamped())).toEqual(ok);
    });

    it('accepts the parts in any order and with spaces after the commas', () => {
      const v1 = timestampedHeader(VECTOR.body, NOW_SECONDS).split(',')[1];
      expect(verifySignature(VECTOR.body, `${v1}, t=${NOW_SECONDS}`, timestamped())).toEqual(ok);
    });

    it('accepts a header with several v1= values when one of them is valid', () => {
      const valid = timestampedHeader(VECTOR.body, NOW_SECONDS).split(',')[1];
      const header = `t=${NOW_SECONDS},v1=${'0'.repeat(64)},${valid},v1=not-hex,v0=${VECTOR.hex}`;
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(ok);
    });

    it('rejects a header whose v1= values are all wrong', () => {
      const header = `t=${NOW_SECONDS},v1=${'0'.repeat(64)},v1=${VECTOR.hex}`;
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(invalid);
    });

    it.each([
      ['exactly the tolerance in the past', -300, ok],
      ['one second past the tolerance in the past', -301, invalid],
      ['exactly the tolerance in the future', 300, ok],
      ['one second past the tolerance in the future', 301, invalid],
      ['a day old', -86_400, invalid],
    ])('judges a signature made %s', (_, offset, expected) => {
      const header = timestampedHeader(VECTOR.body, NOW_SECONDS + offset);
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(expected);
    });

    it('says why a stale signature fails', () => {
      const header = timestampedHeader(VECTOR.body, NOW_SECONDS - 301);
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(
        expect.objectContaining({ reason: 'signature timestamp is outside the tolerance' }),
      );
    });

    it.each([
      ['no t=', `v1=${VECTOR.hex}`],
      ['an empty t=', `t=,v1=${VECTOR.hex}`],
      ['a t= that is not a number', `t=yesterday,v1=${VECTOR.hex}`],
      ['a t= in milliseconds with a fraction', `t=${NOW_SECONDS}.5,v1=${VECTOR.hex}`],
      ['a negative t=', `t=-${NOW_SECONDS},v1=${VECTOR.hex}`],
      ['a t= in ISO-8601', `t=${NOW.toISOString()},v1=${VECTOR.hex}`],
      ['a t= with 13 digits', `t=${NOW_SECONDS}000,v1=${VECTOR.hex}`],
      ['no v1=', `t=${NOW_SECONDS}`],
      ['a v1= of the wrong length', `t=${NOW_SECONDS},v1=${VECTOR.hex.slice(1)}`],
      ['a bare hmac-sha256 header', `sha256=${VECTOR.hex}`],
      ['no key=value parts at all', 'garbage'],
    ])('rejects a header with %s', (_, header) => {
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(invalid);
    });

    it('rejects a v1= computed over the body without the "<t>." prefix', () => {
      const header = `t=${NOW_SECONDS},v1=${hmacHex(VECTOR.secret, VECTOR.body)}`;
      expect(verifySignature(VECTOR.body, header, timestamped())).toEqual(invalid);
    });

    it('rejects a valid v1= moved to another t=', () => {
      const v1 = timestampedHeader(VECTOR.body, NOW_SECONDS).split(',')[1];
      expect(verifySignature(VECTOR.body, `t=${NOW_SECONDS - 1},${v1}`, timestamped())).toEqual(invalid);
    });
  });

  describe('the raw bytes', () => {
    const event = { id: 'evt_1', type: 'task.completed', data: { task: { id: 'tsk_1' } } };
    const sent = Buffer.from(JSON.stringify(event, null, 2));

    it.each<SignatureScheme>(['hmac-sha256', 'timestamped'])('rejects the same JSON re-serialised with other whitespace (%s)', (scheme) => {
      const header = signBody(sent, VECTOR.secret, scheme, NOW);
      expect(verifySignature(sent, header, options({ scheme }))).toEqual(ok);
      expect(verifySignature(Buffer.from(JSON.stringify(event)), header, options({ scheme }))).toEqual(invalid);
    });

    it('rejects the same text with a trailing newline', () => {
      const header = signBody(VECTOR.body, VECTOR.secret);
      expect(verifySignature(Buffer.from('Hello, World!\n'), header, options())).toEqual(invalid);
    });
  });

  describe('properties', () => {
    const RUNS = 2_000;
    const schemes = fc.constantFrom<SignatureScheme>('hmac-sha256', 'timestamped');
    // Any bytes at all, not only valid UTF-8: the check must work on the bytes as sent.
    const bodies = fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes));
    const secrets = fc.string({ minLength: 1, maxLength: 64, unit: 'binary' });
    const hexDigit = fc.constantFrom(...'0123456789abcdef');

    it('accepts what signBody signed, in both schemes', () => {
      fc.assert(
        fc.property(bodies, secrets, schemes, (body, secret, scheme) => {
          const header = signBody(body, secret, scheme, NOW);
          expect(verifySignature(body, header, options({ scheme, secrets: [secret] }))).toEqual(ok);
        }),
        { numRuns: RUNS },
      );
    });

    it('rejects the signature with any one hex character changed', () => {
      fc.assert(
        fc.property(bodies, secrets, schemes, fc.nat(63), hexDigit, (body, secret, scheme, position, digit) => {
          const header = signBody(body, secret, scheme, NOW);
          const start = header.length - 64; // the hex is last in both schemes
          const index = start + position;
          const replacement = header[index] === digit ? (digit === '0' ? '1' : '0') : digit;
          const tampered = header.slice(0, index) + replacement + header.slice(index + 1);
          expect(verifySignature(body, tampered, options({ scheme, secrets: [secret] }))).toEqual(invalid);
        }),
        { numRuns: RUNS },
      );
    });

    it('never throws, whatever the header', () => {
      const headers = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.array(fc.oneof(fc.constant('t='), fc.constant('v1='), fc.constant('sha256='), fc.constant(','), fc.string(), fc.stringMatching(/^[0-9a-f]{64}$/)), { maxLength: 8 }).map((parts) => parts.join('')),
      );
      fc.assert(
        fc.property(bodies, headers, schemes, (body, header, scheme) => {
          const result = verifySignature(body, header, options({ scheme }));
          expect(typeof result.ok).toBe('boolean');
        }),
        { numRuns: RUNS },
      );
    });
  });
});
