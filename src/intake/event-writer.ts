/**
 * Group commit for accepted events. Each caller's event joins the batch being
 * formed; one INSERT … ON CONFLICT DO NOTHING RETURNING commits the whole batch,
 * and only then is each caller told whether its event was new or a duplicate.
 * Nothing is acknowledged before it is committed, and under load many events
 * share one transaction (one fsync) instead of paying one each. When the
 * database refuses the batch (a storage fault), every caller in it gets the
 * same refusal, 503 storage_unavailable: none of them was stored.
 */
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { Database } from '../database/database.service.js';
import { queryRows } from '../database/sql.js';
import type { EventSource } from '../database/event.entity.js';

export interface NewEvent {
  eventId: string;
  type: string;
  resourceKey: string | null;
  source: EventSource;
  payload: string;
  depth?: number;
  replayOf?: string | null;
}

export type WriteOutcome = 'accepted' | 'duplicate';

interface Waiting {
  event: NewEvent;
  resolve: (outcome: WriteOutcome) => void;
  reject: (error: unknown) => void;
}

const COLUMNS = [
  'event_id', 'type', 'resource_key', 'status', 'source', 'payload',
  'depth', 'replay_of', 'received_at', 'attempts', 'next_attempt_at',
];
/** Keeps a batch well under SQLite's and PostgreSQL's bound-parameter limits. */
const MAX_BATCH = 500;

@Injectable()
export class EventWriter {
  private waiting: Waiting[] = [];
  private flushing = false;
  private readonly listeners: Array<() => void> = [];

  constructor(
    private readonly db: Database,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** Called after every commit that stored at least one new event (wakes the workers). */
  onCommitted(listener: () => void): void {
    this.listeners.push(listener);
  }

  write(event: NewEvent): Promise<WriteOutcome> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ event, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        // After the I/O callbacks already due, so every request that has arrived joins this batch.
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    let stored = 0;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      try {
        const inserted = await this.insert(batch.map((w) => w.event));
        for (const waiting of batch) {
          const isNew = inserted.delete(waiting.event.eventId);
          if (isNew) stored++;
          waiting.resolve(isNew ? 'accepted' : 'duplicate');
        }
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
    }
    this.flushing = false;
    if (stored > 0) for (const listener of this.listeners) listener();
  }

  private async insert(events: NewEvent[]): Promise<Set<string>> {
    const now = this.clock.now().toISOString();
    const params: unknown[] = [];
    for (const e of events) {
      params.push(e.eventId, e.type, e.resourceKey, 'received', e.source, e.payload, e.depth ?? 0, e.replayOf ?? null, now, 0, now);
    }
    const row = `(${COLUMNS.map(() => '?').join(', ')})`;
    const sql =
      `INSERT INTO events (${COLUMNS.join(', ')}) VALUES ${events.map(() => row).join(', ')} ` +
      `ON CONFLICT (event_id) DO NOTHING RETURNING event_id`;
    const rows = await this.db.write((manager) => queryRows<{ event_id: string }>(manager, sql, params), { durable: true });
    return new Set(rows.map((r) => r.event_id));
  }
}
