/**
 * One rate budget for every replica on a PostgreSQL database (issue 9). The
 * service counts calls per account, so N replicas that each kept their own
 * budget (rate-budget.ts) would together send N times the plan.
 *
 * Replicas lease slices of the budget instead of asking the database for every
 * call: a replica takes a *grant* of k slots (a row of `rate_budget_grants`:
 * replica, granted_at, slots) and may start k calls within G (GRACE_MS) of
 * `granted_at`; slots not used by then are forfeited. A grant is made in a
 * transaction that locks the one row of `rate_budget`, reads the database's
 * clock after taking the lock, and is made only if the slots of the grants of
 * the last W + G (W: the 60 s window), plus k, stay within the limit. The clock
 * is read by the statement after the lock's: PostgreSQL computes a locking
 * SELECT's columns before it waits for the lock, so a clock read there could be
 * older than the grant made while it waited, and the grants would not be in
 * the order of their times (a grant behind a stale clock then counted from too
 * early a start, after a later one had deleted what it should have counted).
 *
 * Why no 60 s window of call starts can hold more than the limit: take the
 * calls started in [t, t + W). Each used a slot of a grant g made at most G
 * before it, so granted_at(g) is in (t - G, t + W). Let g* be the latest of
 * those grants, made at T* < t + W. The lock orders grants and the clock is
 * read under it, so every other g was made before g*, at granted_at(g) > t - G
 * > T* - W - G: all of them were within the W + G counted when g* was made,
 * and so their slots, g*'s included, were at most the limit.
 *
 * Clocks: granted_at is the database's clock, read under the lock. A replica
 * measures G on its own monotonic clock from *before* it asked, which can only
 * end its grant earlier than the database's G after granted_at.
 *
 * A pause (`X-RateLimit-Remaining: 0`, a 429's `Retry-After`) is written to
 * `rate_budget.paused_until`, and grants are refused until then, so every
 * replica holds. A replica learns of another's pause at its next grant: until
 * then it may still use the slots it holds (at most k, within G).
 *
 * k follows demand (the calls this replica started in the last G, at least 1,
 * at most GRANT_SHARE of the limit), so an idle replica does not lease slots it
 * forfeits; it asks once per k calls, so the database is not asked per call.
 * Grants that have left the counted span are deleted as new ones are made.
 */
import { Database } from '../database/database.service.js';
import { statementsOf, type Statements } from '../database/statements.js';
import { BudgetWaitTooLong, DEFAULT_PAUSE_MS, type Budget, type BudgetRoom, type Sleep } from './rate-budget.js';

/** How long a grant's slots may be used. */
export const GRACE_MS = 2_000;
/** A grant is at most this share of the limit. */
const GRANT_SHARE = 30;

export interface SharedRateBudgetOptions {
  db: Database;
  /** Who holds the grants (the work queue's lease owner). */
  replica: string;
  limitPerMinute: number;
  /** The engine's clock (ms), for the pause's end as the overview shows it. */
  clock: () => number;
  /** The window; one minute unless a test says otherwise. */
  windowMs?: number;
  /** G; GRACE_MS unless a test says otherwise. */
  graceMs?: number;
  /** A monotonic clock (ms) for this replica's grants; performance.now unless a test says otherwise. */
  monotonic?: () => number;
}

/** The budget's state as a grant reads it under the lock. Times are ms on the database's clock. */
export interface GrantState {
  now: number;
  pausedUntil: number | null;
  /** Slots of the grants made in the last W + G. */
  used: number;
  /** When the oldest of those was made. */
  oldest: number | null;
}

export interface GrantDecision {
  slots: number;
  /** When refused: ms until a slot may be granted. */
  waitMs: number;
  /** Refused because a replica paused the budget. */
  paused: boolean;
  /** Slots left in the counted span after this grant. */
  free: number;
  /** When this grant took the last slot: ms until one frees (so the replica need not ask before). */
  fullForMs: number;
}

/** The grant arithmetic, pure: how many of the `want` slots may be granted now. */
export function decideGrant(state: GrantState, limit: number, want: number, spanMs: number): GrantDecision {
  if (state.pausedUntil !== null && state.pausedUntil > state.now) return { slots: 0, waitMs: Math.ceil(state.pausedUntil - state.now), paused: true, free: 0, fullForMs: 0 };
  const free = limit - state.used;
  // The oldest counted grant (or this one) leaving the span frees at least one slot.
  const freesAt = (state.oldest ?? state.now) + spanMs;
  if (free <= 0) {
    return { slots: 0, waitMs: Math.max(1, Math.ceil(freesAt - state.now)), paused: false, free: 0, fullForMs: 0 };
  }
  const slots = Math.min(free, Math.max(1, want));
  const fullForMs = slots < free ? 0 : Math.max(1, Math.ceil(freesAt - state.now));
  return { slots, waitMs: 0, paused: false, free: free - slots, fullForMs };
}

const NOW_MS = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8`;
const LOCK = 'SELECT paused_until FROM rate_budget WHERE id = 1 FOR UPDATE';
/** The clock, read with the lock held, and the grants of the span before it. */
const COUNTED = `SELECT c.now, COALESCE(SUM(g.slots), 0) AS used, MIN(g.granted_at) AS oldest
  FROM (SELECT ${NOW_MS} AS now) c LEFT JOIN rate_budget_grants g ON g.granted_at > c.now - ?
  GROUP BY c.now`;
const GRANT = 'INSERT INTO rate_budget_grants (replica, granted_at, slots) VALUES (?, ?, ?)';
const FORGET = 'DELETE FROM rate_budget_grants WHERE granted_at <= ?';
const PAUSE = `UPDATE rate_budget SET paused_until = GREATEST(COALESCE(paused_until, 0), ${NOW_MS} + ?) WHERE id = 1`;

/** One grant, in the caller's transaction. */
export async function grantSlots(sql: Statements, replica: string, limit: number, want: number, spanMs: number): Promise<GrantDecision> {
  const [lock] = await sql.rows<{ paused_until: number | null }>(LOCK);
  if (!lock) throw new Error('rate_budget has no row: the migration 1764900000000-shared-rate-budget did not run');
  const [counted] = await sql.rows<{ now: number; used: number | string; oldest: number | null }>(COUNTED, [spanMs]);
  const now = Number(counted!.now);
  const since = now - spanMs;
  const state = { now, pausedUntil: lock.paused_until === null ? null : Number(lock.paused_until), used: Number(counted!.used), oldest: counted!.oldest };
  const decision = decideGrant(state, limit, want, spanMs);
  if (decision.slots > 0) await sql.run(GRANT, [replica, now, decision.slots]);
  await sql.run(FORGET, [since]);
  return decision;
}

interface Held {
  /** Monotonic time the slots are forfeited. */
  until: number;
  left: number;
}

export class SharedRateBudget implements Budget {
  readonly limit: number;
  private readonly db: Database;
  private readonly replica: string;
  private readonly clock: () => number;
  private readonly mono: () => number;
  private readonly graceMs: number;
  private readonly spanMs: number;
  private readonly cap: number;
  private held: Held[] = [];
  /** Monotonic times of this replica's recent takes: its demand. */
  private takes: number[] = [];
  /** No grant before this monotonic time (a refusal said so, or a pause). */
  private refusedUntil = Number.NEGATIVE_INFINITY;
  private pausedUntilMono = Number.NEGATIVE_INFINITY;
  /** Slots left in the shared window at the last grant: what the overview shows. */
  private lastFree: number;
  private granting: Promise<void> | undefined;

  constructor(options: SharedRateBudgetOptions) {
    const { db, replica, limitPerMinute, clock, windowMs = 60_000, graceMs = GRACE_MS, monotonic = () => performance.now() } = options;
    if (!Number.isInteger(limitPerMinute) || limitPerMinute < 1) throw new RangeError(`limitPerMinute must be a positive integer, got ${limitPerMinute}`);
    this.db = db;
    this.replica = replica;
    this.clock = clock;
    this.mono = monotonic;
    this.graceMs = graceMs;
    this.limit = limitPerMinute;
    this.spanMs = windowMs + graceMs;
    this.cap = Math.max(1, Math.ceil(limitPerMinute / GRANT_SHARE));
    this.lastFree = limitPerMinute;
  }

  async take(): Promise<number> {
    this.noteTake(this.mono());
    for (;;) {
      const now = this.mono();
      const wait = this.blockedFor(now);
      if (wait > 0) return wait;
      if (this.useHeld(now)) return 0;
      // One grant at a time per replica: callers arriving meanwhile look again once it is in.
      this.granting ??= this.grant().finally(() => (this.granting = undefined));
      await this.granting;
    }
  }

  /**
   * Slots held, plus what one grant could bring unless the database refused
   * lately; never a round trip. An estimate: another replica may have taken
   * the rest meanwhile, and then a few claimed runs are handed back once.
   */
  room(wanted: number): BudgetRoom {
    if (wanted <= 0) return { free: 0, waitMs: 0 };
    const now = this.mono();
    const wait = this.blockedFor(now);
    if (wait > 0) return { free: 0, waitMs: wait };
    const obtainable = Math.max(1, Math.min(this.cap, this.lastFree));
    return { free: Math.min(wanted, this.heldSlots(now) + obtainable), waitMs: 0 };
  }

  async acquire(sleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms)), maxWaitMs = Number.POSITIVE_INFINITY): Promise<void> {
    const deadline = this.mono() + maxWaitMs;
    for (let wait = await this.take(); wait > 0; wait = await this.take()) {
      if (this.mono() + wait > deadline) throw new BudgetWaitTooLong(wait);
      await sleep(wait);
    }
  }

  /** Holds this replica at once, and every replica through the database (written in the background; should it fail, this replica still holds). */
  pauseFor(ms: number = DEFAULT_PAUSE_MS): void {
    this.holdLocally(ms);
    this.sharePause(ms).catch(() => undefined);
  }

  /** The shared part of a pause, for callers (tests) that want to know it is written. */
  sharePause(ms: number): Promise<number> {
    return this.db.write((manager) => statementsOf(manager).run(PAUSE, [ms]));
  }

  remaining(): number {
    const now = this.mono();
    if (now < this.pausedUntilMono) return 0;
    return Math.min(this.limit, this.heldSlots(now) + Math.max(0, this.lastFree));
  }

  pausedUntil(): number | undefined {
    const left = this.pausedUntilMono - this.mono();
    return left > 0 ? this.clock() + left : undefined;
  }

  private blockedFor(now: number): number {
    const until = Math.max(this.pausedUntilMono, this.heldSlots(now) > 0 ? Number.NEGATIVE_INFINITY : this.refusedUntil);
    return now < until ? Math.ceil(until - now) : 0;
  }

  private holdLocally(ms: number): void {
    const until = this.mono() + ms;
    if (until > this.pausedUntilMono) this.pausedUntilMono = until;
    this.refusedUntil = Math.max(this.refusedUntil, until);
    this.held = []; // the service refuses calls now: what is held would be spent on refusals
  }

  private heldSlots(now: number): number {
    this.held = this.held.filter((h) => h.until > now && h.left > 0);
    return this.held.reduce((sum, h) => sum + h.left, 0);
  }

  private useHeld(now: number): boolean {
    if (this.heldSlots(now) === 0) return false;
    this.held[0]!.left -= 1;
    return true;
  }

  private noteTake(now: number): void {
    this.takes.push(now);
    while (this.takes[0]! <= now - this.graceMs) this.takes.shift();
  }

  private async grant(): Promise<void> {
    const asked = this.mono();
    const want = Math.min(this.cap, Math.max(1, this.takes.length));
    const decision = await this.db.write((manager) => grantSlots(statementsOf(manager), this.replica, this.limit, want, this.spanMs));
    this.lastFree = decision.free;
    if (decision.slots > 0) {
      this.held.push({ until: asked + this.graceMs, left: decision.slots });
      // It took the last slot: no use asking again (or claiming more) before one frees.
      if (decision.fullForMs > 0) this.refusedUntil = this.mono() + decision.fullForMs;
      return;
    }
    // Another replica's pause is held here too (and shown by this replica's overview).
    if (decision.paused) this.holdLocally(decision.waitMs);
    else this.refusedUntil = this.mono() + decision.waitMs;
  }
}
