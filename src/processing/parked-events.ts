/**
 * The events intake leased to this process while a create in their scope was
 * in flight (the causal barrier, work-queue.ts FRESH_LEASE_SQLITE and
 * FRESH_LEASE_POSTGRES), kept aside, oldest first, until no create in flight
 * holds them back. The commits that record this process's outcomes ask which
 * may go on (WorkQueue.goneOn) as they end its creates; the event loop asks
 * itself, at most every `everyMs`, for creates that end otherwise (another
 * replica's, a lease that ran out, a run handed back for the rate budget).
 *
 * An event is handed on once: whoever takes it out of here (`unpark`) first.
 */
import type { CausalScope } from '../causal-scope.js';
import type { HeldBehind } from '../intake/event-writer.js';
import type { ClaimedEvent } from './work.js';

export type ParkedEvent = ClaimedEvent & { held: HeldBehind };

export class ParkedEvents {
  private readonly events: ParkedEvent[] = [];
  /** How many are parked in each scope (scopeKey). */
  private readonly inScope = new Map<string, number>();
  private lookedAt = 0;

  constructor(private readonly everyMs: number) {}

  get size(): number {
    return this.events.length;
  }

  /** The parked events, oldest first (to ask which may go on). */
  get all(): readonly ParkedEvent[] {
    return this.events;
  }

  /** Keeps aside the events held behind creates in flight; returns the others. */
  park(leased: ClaimedEvent[]): ClaimedEvent[] {
    const ready: ClaimedEvent[] = [];
    for (const event of leased) {
      if (event.held === undefined) ready.push(event);
      else {
        this.events.push(event as ParkedEvent);
        this.count(event.held.scope, 1);
      }
    }
    return ready;
  }

  /** Of `events` (some parked, some not), those to hand on: the parked ones are taken out, unless taken already. */
  unpark(events: ClaimedEvent[]): ClaimedEvent[] {
    return events.filter((event) => {
      if (event.held === undefined) return true;
      const at = this.events.indexOf(event as ParkedEvent);
      if (at < 0) return false;
      this.events.splice(at, 1);
      this.count(event.held.scope, -1);
      return true;
    });
  }

  /** Whether the event loop should ask itself now (some are parked, and it has not asked for `everyMs`). */
  dueForALook(now = Date.now()): boolean {
    if (this.events.length === 0 || now - this.lookedAt < this.everyMs) return false;
    this.lookedAt = now;
    return true;
  }

  /** Forgets them all: their leases are given back (a storage fault), and a claim takes them again. */
  clear(): void {
    this.events.splice(0);
    this.inScope.clear();
  }

  /**
   * Whether an event of `scope` is parked: a create in flight holds that scope, and a new event in it will likely be
   * held too (intake on PostgreSQL then leaves its executions to the event loop: EventProcessor.deciderAtIntake).
   */
  holds(scope: CausalScope): boolean {
    return this.inScope.has(scopeKey(scope));
  }

  private count(scope: CausalScope, by: 1 | -1): void {
    const key = scopeKey(scope);
    const n = (this.inScope.get(key) ?? 0) + by;
    if (n > 0) this.inScope.set(key, n);
    else this.inScope.delete(key);
  }
}

const scopeKey = ({ kind, parent }: CausalScope) => `${kind}\u0000${parent ?? ''}`;
