/**
 * The claims and commits that lease action runs to this process, from when each began until its runs are being
 * performed (workers.ts). After a storage fault the process hands back the leases of runs it is not performing, but
 * not those taken since the oldest of these began: such a lease may be committed and its run not started yet.
 */
import type { Clock } from '../clock.js';

export interface Taking {
  at: number;
}

export class LeasesBeingTaken {
  private readonly taking = new Set<Taking>();
  /** Intake's commit under way, which may lease the first runs of the events it decides (one at a time). */
  private intake: Taking | undefined;

  constructor(private readonly clock: Clock) {}

  starts(): Taking {
    const taking = { at: this.clock.now().getTime() };
    this.taking.add(taking);
    return taking;
  }

  ends(taking: Taking): void {
    this.taking.delete(taking);
  }

  /** Intake's next commit begins; the one before it ended, or failed (then nothing else said it ended). */
  intakeStarts(): void {
    this.intakeEnds();
    this.intake = this.starts();
  }

  intakeEnds(): void {
    if (this.intake !== undefined) this.ends(this.intake);
    this.intake = undefined;
  }

  /** Every lease this process took before this time (ms) was taken by a claim or commit that has ended. */
  takenBefore(): number {
    return Math.min(this.clock.now().getTime(), ...[...this.taking].map((taking) => taking.at));
  }
}
