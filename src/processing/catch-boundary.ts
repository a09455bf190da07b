/**
 * The one catch boundary of processing (workers.ts): any throw while handling
 * one item is logged and recorded on the item as a failed attempt (`record`),
 * and the loop goes on. A storage fault is not the item's fault: it is neither
 * logged per item (the database logs the fault once when it starts and once
 * when it ends) nor recorded; `onStorageFault` is told instead, so that the
 * leases it cut short are handed back once writes go through again.
 */
import type { Logger } from '@nestjs/common';
import { storageFaultOf } from '../database/storage-faults.js';
import { StorageUnavailableError } from '../errors.js';

export function isStorageFault(error: unknown): boolean {
  return error instanceof StorageUnavailableError || storageFaultOf(error) !== undefined;
}

/** `work`'s result, or undefined when it threw (recorded as said above). */
export async function guarded<T>(
  logger: Logger,
  onStorageFault: () => void,
  what: string,
  work: () => Promise<T>,
  record?: (error: Error) => Promise<void>,
): Promise<T | undefined> {
  try {
    return await work();
  } catch (error) {
    if (isStorageFault(error)) {
      onStorageFault();
      return undefined;
    }
    logger.error(`${what} failed: ${(error as Error).message}`, (error as Error).stack);
    // If even recording fails (the database is down), the lease runs out and the work is taken again.
    await record?.(error as Error).catch(() => undefined);
    return undefined;
  }
}
