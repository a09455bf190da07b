/**
 * The claims and commits that lease action runs to this process, from when each began until its runs are being
 * performed (workers.ts). After a storage fault the process hands back the leases of runs it is not performing, but
 * not those taken since the oldest of these began: such a lease may be committed and its run not started yet.
 */
import type { Clock } from '../clock.js';

export interface Taking {
  at: number;
}

/** The commits that run one at a time (each its own GroupCommit). */
export type SerialCommit = 'intake' | 'outcomes';

export class LeasesBeingTaken {
  private readonly taking = new Set<Taking>();
  /**
   * The commits under way that run one at a time and may lease the first runs of the events they decide: intake's
   * (the new events), the outcomes' (the events those let go).
   */
  private readonly serial = new Map<SerialCommit, Taking>();

  constructor(private readonly clock: Clock) {}

  starts(): Taking {
    const taking = { at: this.clock.now().getTime() };
    this.taking.add(taking);
    return taking;
  }

  ends(taking: Taking): void {
    this.taking.delete(taking);
  }

  /** `work` (a claim or commit that leases runs, and what starts them) counted as being under way until it settles. */
  async during<T>(work: () => Promise<T>): Promise<T> {
    const taking = this.starts();
    try {
      return await work();
    } finally {
      this.ends(taking);
    }
  }

  /** The next commit of the kind begins; the one before it ended, or failed (then nothing else said it ended). */
  commitStarts(which: SerialCommit): void {
    this.commitEnds(which);
    this.serial.set(which, this.starts());
  }

  commitEnds(which: SerialCommit): void {
    const taking = this.serial.get(which);
    if (taking !== undefined) this.ends(taking);
    this.serial.delete(which);
  }

  /** Every lease this process took before this time (ms) was taken by a claim or commit that has ended. */
  takenBefore(): number {
    return Math.min(this.clock.now().getTime(), ...[...this.taking].map((taking) => taking.at));
  }
}
