/**
 * Group commit: work items that arrive together share one transaction. Each
 * caller's item joins the batch being formed; one `write` commits the whole
 * batch (one fsync, one round trip to PostgreSQL), and only then is each caller
 * told its own result. A batch that fails tells every caller in it.
 */
import type { EntityManager } from 'typeorm';
import type { Database } from './database.service.js';

interface Waiting<I, O> {
  item: I;
  resolve: (result: O) => void;
  reject: (error: unknown) => void;
}

export interface GroupCommitOptions {
  /** Synced to disk before the callers hear of it (SQLite's synchronous=FULL). */
  durable?: boolean;
  /** The largest batch one transaction takes. */
  maxBatch?: number;
  /**
   * A batch about to be committed waits one more turn of the loop (at most MAX_HOLDS) while items keep arriving,
   * that is while the batch grew in the turn before or `moreOnTheirWay` says more are coming; one item alone is
   * committed at once. For SQLite's commits, which run on the event loop: intake's blocks it while it syncs, so what
   * arrives meanwhile would wait for a commit of its own (webhooks over kept-alive connections come in bursts, their
   * senders answered together by the commit before); the outcomes' would otherwise run in small pieces in the turns
   * intake's batch waits.
   */
  holdWhileArriving?: boolean;
  /** Whether more items are on their way (connections accepted whose first request is not read yet). */
  moreOnTheirWay?: () => boolean;
}

/** Turns of the event loop a batch waits, at most, for items arriving (`holdWhileArriving`). */
export const MAX_HOLDS = 2;

/** Told of each committed batch's results, before its callers are. */
export type AfterCommit<O> = (results: O[]) => void;

/**
 * A batch's results known only once its transaction's statements are answered: its last statement sent with the
 * COMMIT (Statements.queueRows), so the transaction's work returns before they are. Awaited after the commit.
 */
export interface Answered<O> {
  answered: Promise<O[]>;
}

export class GroupCommit<I, O> {
  private waiting: Waiting<I, O>[] = [];
  private flushing = false;
  /** Ends when the flush under way (if any) has committed or refused everything submitted before it ended. */
  private flushed: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database,
    /** Commits a batch inside the transaction; one result per item, in order (or their promise: Answered). */
    private readonly commitBatch: (manager: EntityManager, items: I[]) => Promise<O[] | Answered<O>>,
    private readonly options: GroupCommitOptions = {},
    private readonly afterCommit?: AfterCommit<O>,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        // After the I/O callbacks already due, so everything that has arrived joins this batch.
        this.flushed = new Promise((done) => setImmediate(() => void this.flush().finally(done)));
      }
    });
  }

  /** Resolves once every item submitted so far has been committed or refused (its caller told). */
  settled(): Promise<void> {
    return this.flushed;
  }

  private async flush(): Promise<void> {
    if (this.options.holdWhileArriving) await this.whileArriving();
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.options.maxBatch ?? 500);
      try {
        const committed = await this.db.write((manager) => this.commitBatch(manager, batch.map((w) => w.item)), { durable: this.options.durable });
        const results = Array.isArray(committed) ? committed : await committed.answered;
        this.afterCommit?.(results);
        batch.forEach((waiting, i) => waiting.resolve(results[i]));
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
    }
    this.flushing = false;
  }

  /** Waits a turn of the event loop while items keep arriving (GroupCommitOptions.holdWhileArriving). */
  private async whileArriving(): Promise<void> {
    let seen = 1; // the item whose submission started this flush
    for (let turn = 0; turn < MAX_HOLDS && (this.waiting.length > seen || this.options.moreOnTheirWay?.()); turn++) {
      seen = this.waiting.length;
      await new Promise(setImmediate);
    }
  }
}
