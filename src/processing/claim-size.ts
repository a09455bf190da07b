/**
 * How many events the event loop's next claim asks for.
 *
 * On PostgreSQL every batch is a chain of round trips (the claim, the commit
 * of the evaluated batch, and after its actions the commit of their outcomes),
 * and events that wait behind the causal barrier (new resources in a scope
 * with a create in flight) can only go one batch at a time. With a backlog,
 * batches of 32 held processing below what intake took in, and the backlog
 * grew for as long as the load lasted. So there a claim that comes back full
 * doubles the next one, up to CLAIM_MAX_POSTGRES, and one that does not goes
 * back to CLAIM_MIN. SQLite's claims are in-process calls, and larger ones
 * slowed the drain of a backlog: it claims CLAIM_MIN.
 */
import type { DatabaseKind } from '../database/data-source.js';

export const CLAIM_MIN = 32;
export const CLAIM_MAX_POSTGRES = 256;

/** The next claim's limit, after a claim that asked for `asked` events and got `got`. */
export function claimSize(kind: DatabaseKind, asked: number, got: number): number {
  if (kind !== 'postgres') return CLAIM_MIN;
  return got >= asked ? Math.min(asked * 2, CLAIM_MAX_POSTGRES) : CLAIM_MIN;
}

/**
 * How many of the events handed over by commits (intake's, leased to this process) the event loop takes at once. On
 * PostgreSQL all that wait, up to CLAIM_MAX_POSTGRES: with batches of 32, when no rule matched (each batch one commit
 * of round trips, nothing else to do), evaluation fell behind intake, 18,700–19,300 events behind after 10 s of 32
 * clients, 2.6–2.8 s to catch up; taking what waits, 17–85 behind, 0.02–0.15 s. SQLite takes CLAIM_MIN, as its claims.
 */
export function handedBatchSize(kind: DatabaseKind): number {
  return kind === 'postgres' ? CLAIM_MAX_POSTGRES : CLAIM_MIN;
}
