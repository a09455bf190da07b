/**
 * Webhook signatures (SPEC section 4). Both schemes are HMAC-SHA256 over the raw
 * body bytes exactly as received; several secrets may be configured at once so a
 * secret can be rotated without dropping deliveries.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

import type { SignatureScheme } from '../config/config.js';

export type { SignatureScheme };

export type SignatureCheck =
  | { ok: true }
  | { ok: false; code: 'missing_signature' | 'invalid_signature'; reason: string };

export interface VerifyOptions {
  scheme: SignatureScheme;
  secrets: readonly string[];
  /** Seconds either side of `now` a `timestamped` signature may be. */
  toleranceSeconds: number;
  now: Date;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

export function hmacHex(secret: string, payload: Buffer | string): string {
  return createHmac('sha256', secret).update(payload).digest('hex');
}

/** The header value the service would send for this body. */
export function signBody(
  rawBody: Buffer | string,
  secret: string,
  scheme: SignatureScheme = 'hmac-sha256',
  now: Date = new Date(),
): string {
  if (scheme === 'hmac-sha256') return `sha256=${hmacHex(secret, rawBody)}`;
  const t = Math.floor(now.getTime() / 1000);
  return `t=${t},v1=${hmacHex(secret, Buffer.concat([Buffer.from(`${t}.`), Buffer.from(rawBody)]))}`;
}

function matchesAnySecret(candidates: string[], payload: Buffer, secrets: readonly string[]): boolean {
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(hmacHex(secret, payload), 'hex');
    for (const candidate of candidates) {
      // Every pair is compared, so timing does not reveal which secret or candidate matched.
      const given = Buffer.from(candidate, 'hex');
      if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
    }
  }
  return matched;
}

export function verifySignature(
  rawBody: Buffer,
  header: string | undefined,
  options: VerifyOptions,
): SignatureCheck {
  if (header === undefined || header.trim() === '') {
    return { ok: false, code: 'missing_signature', reason: 'X-Service-Signature header is missing' };
  }
  if (options.scheme === 'hmac-sha256') {
    const hex = header.trim().replace(/^sha256=/, '').toLowerCase();
    if (!HEX_SHA256.test(hex)) {
      return { ok: false, code: 'invalid_signature', reason: 'signature is not 64 hexadecimal characters' };
    }
    return matchesAnySecret([hex], rawBody, options.secrets)
      ? { ok: true }
      : { ok: false, code: 'invalid_signature', reason: 'signature does not match' };
  }
  return verifyTimestamped(rawBody, header, options);
}

function verifyTimestamped(rawBody: Buffer, header: string, options: VerifyOptions): SignatureCheck {
  let timestamp: string | undefined;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') timestamp = value;
    else if (key === 'v1' && HEX_SHA256.test(value.toLowerCase())) candidates.push(value.toLowerCase());
  }
  if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, code: 'invalid_signature', reason: 'signature has no valid t= timestamp' };
  }
  if (candidates.length === 0) {
    return { ok: false, code: 'invalid_signature', reason: 'signature has no valid v1= value' };
  }
  const skew = Math.abs(options.now.getTime() / 1000 - Number(timestamp));
  if (skew > options.toleranceSeconds) {
    return { ok: false, code: 'invalid_signature', reason: 'signature timestamp is outside the tolerance' };
  }
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`), rawBody]);
  return matchesAnySecret(candidates, signed, options.secrets)
    ? { ok: true }
    : { ok: false, code: 'invalid_signature', reason: 'signature does not match' };
}
