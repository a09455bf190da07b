/**
 * `Idempotency-Key` on writes: the first successful answer for a key is kept and
 * replayed byte for byte to later requests with that key, which therefore have no
 * side effect. Failures are not kept, so a retry after a 500 really runs again.
 * Keys are scoped by API key, as one client's keys must not collide with another's.
 */
import type { Answer } from './simulator.http.js';

interface Stored {
  fingerprint: string;
  status: number;
  bodyText?: string;
}

export type IdempotencyLookup =
  | { kind: 'new' }
  | { kind: 'replay'; answer: Answer }
  | { kind: 'mismatch' };

export class IdempotencyStore {
  private readonly answers = new Map<string, Stored>();
  /** Idempotency key → how many times a request with it changed the state. */
  readonly effects = new Map<string, number>();

  lookup(scope: string, key: string, fingerprint: string): IdempotencyLookup {
    const stored = this.answers.get(`${scope}\u0000${key}`);
    if (stored === undefined) return { kind: 'new' };
    if (stored.fingerprint !== fingerprint) return { kind: 'mismatch' };
    return { kind: 'replay', answer: { status: stored.status, bodyText: stored.bodyText } };
  }

  record(scope: string, key: string, fingerprint: string, status: number, bodyText?: string): void {
    this.answers.set(`${scope}\u0000${key}`, { fingerprint, status, bodyText });
    this.effects.set(key, (this.effects.get(key) ?? 0) + 1);
  }

  clear(): void {
    this.answers.clear();
    this.effects.clear();
  }
}

/** Same key, different request: a client bug the service refuses rather than guesses about. */
export function fingerprintOf(method: string, path: string, body: unknown): string {
  return `${method} ${path} ${body === undefined ? '' : JSON.stringify(body)}`;
}
