/**
 * Whether the database takes writes, as the engine last found out. A fault
 * starts with the first write the database refuses (a full disk, a read-only
 * file, an I/O error, PostgreSQL unreachable or refusing writes) and ends with
 * the first write that goes through once no write has failed for QUIET_MS: on a
 * disk that has just filled up, a small write still fits for a moment into space
 * that a failed larger one had taken, and the fault would seem to end and start
 * again within milliseconds. Each fault is logged twice, once when
 * it starts and once when it ends (with how long it lasted and how many requests
 * it refused), however many writes fail in between: a stack trace per refused
 * request would bury the one line an operator needs.
 */
import { Logger } from '@nestjs/common';
import { StorageUnavailableError, type StorageFaultKind } from '../errors.js';
import { refusalMessage, type StorageFault } from './storage-faults.js';

export interface CurrentFault {
  kind: StorageFaultKind;
  /** The driver's words for the last refused write. */
  error: string;
  since: Date;
}

/** How long no write may have failed before one that goes through ends a fault. */
export const QUIET_MS = 1_000;

interface Outage extends CurrentFault {
  lastFailure: number;
  kinds: Set<StorageFaultKind>;
  failedWrites: number;
  refusedRequests: number;
}

type Log = Pick<Logger, 'warn' | 'log'>;

export class StorageHealth {
  private outage: Outage | undefined;
  private readonly failures = new Map<StorageFaultKind, number>();
  private started = 0;

  constructor(
    private readonly logger: Log = new Logger('storage'),
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The fault in progress, or undefined while writes go through. */
  get current(): CurrentFault | undefined {
    const outage = this.outage;
    return outage && { kind: outage.kind, error: outage.error, since: outage.since };
  }

  /** How many faults have started since the engine did: whoever holds work across one can tell that one happened. */
  get faultsStarted(): number {
    return this.started;
  }

  /** Failed writes since start, by kind (the `engine_storage_failures_total` counter). */
  get failuresByKind(): ReadonlyMap<StorageFaultKind, number> {
    return this.failures;
  }

  /** A write was refused: the fault starts or goes on. Returns what the caller is told. */
  failed(fault: StorageFault): StorageUnavailableError {
    this.failures.set(fault.kind, (this.failures.get(fault.kind) ?? 0) + 1);
    if (this.outage) {
      Object.assign(this.outage, { kind: fault.kind, error: fault.message, lastFailure: this.now().getTime() });
      this.outage.kinds.add(fault.kind);
      this.outage.failedWrites++;
    } else {
      const since = this.now();
      this.started++;
      this.outage = { kind: fault.kind, error: fault.message, since, lastFailure: since.getTime(), kinds: new Set([fault.kind]), failedWrites: 1, refusedRequests: 0 };
      this.logger.warn({
        msg: 'the database refuses writes: webhooks and admin writes are answered 503 storage_unavailable, workers pause, until a write goes through',
        kind: fault.kind,
        error: fault.message,
      });
    }
    const outage = this.outage;
    return new StorageUnavailableError(fault.kind, refusalMessage(fault.kind), { refused: () => void outage.refusedRequests++ });
  }

  /** True when a write that goes through now would end the fault in progress (or there is none). */
  get settled(): boolean {
    return !this.outage || this.now().getTime() - this.outage.lastFailure >= QUIET_MS;
  }

  /** A write went through: the fault in progress ends, if no write failed in the last QUIET_MS. True when none is left. */
  recovered(): boolean {
    const outage = this.outage;
    if (!outage) return true;
    if (!this.settled) return false;
    this.outage = undefined;
    this.logger.log({
      msg: 'the database takes writes again',
      kinds: [...outage.kinds],
      since: outage.since.toISOString(),
      seconds: Math.round((this.now().getTime() - outage.since.getTime()) / 100) / 10,
      refusedRequests: outage.refusedRequests,
      failedWrites: outage.failedWrites,
    });
    return true;
  }
}
