/**
 * Everything the benchmark creates (child processes, temp folders, databases)
 * registers how to undo itself here, so that a failed run, Ctrl-C or a crash
 * leaves nothing behind. Undo steps run newest first, each at most once, and a
 * failing step does not stop the others. A step may be run early by its owner
 * (a database dropped after its run); `runAll` also waits for such steps still
 * in progress, so an interrupted run never exits halfway through a DROP.
 *
 * Once interrupted, the run goes on only until it next creates something: that
 * is undone at once and its creator stopped with an error, so nothing made
 * after Ctrl-C outlives the clean-up that Ctrl-C started.
 */
import type { ChildProcess } from 'node:child_process';

type Undo = () => Promise<void> | void;

export class Cleanup {
  private steps: Array<{ what: string; undo: Undo }> = [];
  private readonly inProgress = new Set<Promise<void>>();
  private readonly children = new Set<ChildProcess>();
  private interrupted = false;

  /** From now on, whatever registers is undone at once (see above). */
  interrupt(): void {
    this.interrupted = true;
  }

  get wasInterrupted(): boolean {
    return this.interrupted;
  }

  /** Registers an undo step; the function returned runs it now (once). */
  add(what: string, undo: Undo): () => Promise<void> {
    if (this.interrupted) {
      void this.track(Promise.resolve().then(undo)).catch(() => undefined);
      throw new Error(`interrupted (undid "${what}" at once)`);
    }
    const step = { what, undo };
    this.steps.push(step);
    return () => {
      if (!this.steps.includes(step)) return Promise.resolve();
      this.steps = this.steps.filter((s) => s !== step);
      return this.track(Promise.resolve().then(step.undo));
    };
  }

  /** Tracked apart from the steps too: 'exit' handlers cannot wait, but can still SIGKILL. */
  trackChild(child: ChildProcess): void {
    if (this.interrupted) child.kill('SIGKILL');
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
  }

  /** Undoes every step, newest first, until none is registered or in progress (one may register meanwhile). */
  async runAll(report: (line: string) => void): Promise<void> {
    while (this.steps.length > 0 || this.inProgress.size > 0) {
      const steps = this.steps.reverse();
      this.steps = [];
      for (const step of steps) {
        try {
          await this.track(Promise.resolve().then(step.undo));
        } catch (error) {
          report(`bench: cleanup "${step.what}" failed: ${(error as Error).message}`);
        }
      }
      await Promise.allSettled([...this.inProgress]);
    }
  }

  /** Last resort, from process.on('exit'): synchronous, so only signals. */
  killChildrenNow(): void {
    for (const child of this.children) child.kill('SIGKILL');
  }

  private track(work: Promise<void>): Promise<void> {
    this.inProgress.add(work);
    return work.finally(() => this.inProgress.delete(work));
  }
}
