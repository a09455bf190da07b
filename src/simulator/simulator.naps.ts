/** Delays that a close cuts short, so a scripted 10 s delay cannot hold a test run open. */
export class Naps {
  private readonly sleepers = new Set<() => void>();

  sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  /** Ends every delay now. */
  wakeAll(): void {
    for (const wake of this.sleepers) wake();
  }
}
