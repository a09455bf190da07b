/**
 * The event loop's own claim (workers.ts): how many events it asks for
 * (claim-size.ts), the pause after one that found nothing, and on SQLite the
 * decision, in the claim's own transaction, of the events it took that need
 * nothing but the database (EventProcessor.decideLetGo, as the commits of
 * outcomes decide the events they let go). A claimed event then costs one
 * commit instead of two, the claim's and the loop's. That was the path of the
 * events intake had no room to lease: where the loop fell behind intake, the
 * second commit was in every window of an open-loop run to its end, and it
 * did not catch up again (session 57). While action runs are in flight, the
 * loop now waits first for the next outcome commit to make this claim in its
 * own transaction, which saves the claim's COMMIT (workers.ts claimedByOutcomes).
 */
import { nowIso, type Clock } from '../clock.js';
import type { Database } from '../database/database.service.js';
import { statementsOf } from '../database/statements.js';
import { CLAIM_MIN, claimSize } from './claim-size.js';
import type { EventProcessor, LetGoDecided } from './event-processor.js';
import type { WorkQueue } from './work-queue.js';
import type { HandOff } from './work.js';

/**
 * After a claim that found nothing, the next one waits this long (events handed over by intake do not): every
 * action run that ends wakes the loop, which under load is far more often than a claim can find something new, and
 * a claim costs (on PostgreSQL, which plans it afresh each time, a few milliseconds of the server's CPU).
 */
const EMPTY_CLAIM_PAUSE_MS = 10;

/** What a claim took: `rest` for the loop to evaluate and commit; on SQLite, those decided in the claim's transaction. */
export interface ClaimDecided extends LetGoDecided {
  /** How many events it took. */
  taken: number;
  /** It took all it asked for: more may be waiting. */
  full: boolean;
}

export class EventClaims {
  /** How many events the next claim asks for (claimSize). */
  private limit = CLAIM_MIN;
  private emptyAt = 0;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly queue: WorkQueue,
    private readonly processor: EventProcessor,
  ) {}

  /** How long (ms) until the next claim, after one that found nothing; ≤ 0: it may claim now. */
  pauseMs(): number {
    return this.emptyAt + EMPTY_CLAIM_PAUSE_MS - Date.now();
  }

  /**
   * Claims waiting events; on SQLite decides in the same transaction those it can, their first runs leased to
   * `handOff` as far as it has room. Throws what the claim throws (the next one then asks for as many again).
   */
  async claim(handOff: HandOff): Promise<ClaimDecided> {
    const limit = this.limit;
    const claimed = this.db.kind === 'postgres' ? { decided: [], rest: await this.queue.claimEvents(limit), made: [] } : await this.claimDeciding(limit, handOff);
    const taken = claimed.decided.length + claimed.rest.length;
    if (taken === 0) this.emptyAt = Date.now();
    this.limit = claimSize(this.db.kind, limit, taken);
    return { ...claimed, taken, full: taken === limit };
  }

  private claimDeciding(limit: number, handOff: HandOff): Promise<LetGoDecided> {
    return this.db.write(async (manager) => {
      const sql = statementsOf(manager);
      const events = await this.queue.claimEventsIn(sql, limit);
      if (events.length === 0) return { decided: [], rest: [], made: [] };
      return this.processor.decideLetGo(sql, events, nowIso(this.clock), handOff);
    });
  }
}
