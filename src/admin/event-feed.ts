/**
 * The live feed behind GET /admin/live/events: one poller for all listeners,
 * running only while someone listens. Every half second it reads the events
 * received since its last look (by seq, the primary key) and looks again at
 * the ones it sent while they were still `received`, so a listener sees each
 * new event and each status change that follows. Each listener gets only the
 * events that pass its filter (event-filter.ts).
 */
import { Injectable, Logger, type MessageEvent, type OnModuleDestroy } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Observable, type Subscriber } from 'rxjs';
import { In, MoreThan, Repository } from 'typeorm';
import { EventEntity } from '../database/event.entity.js';
import { eventMatches, type EventFilter } from './event-filter.js';
import { eventSummary } from './views.js';

export const FEED_INTERVAL_MS = 500;
const PING_EVERY_MS = 15_000;
const BATCH = 500;
/** Events still `received` that the feed keeps looking at; the oldest are let go past this. */
const MAX_WATCHED = 5_000;

interface Listener {
  filter: EventFilter;
  out: Subscriber<MessageEvent>;
}

@Injectable()
export class EventFeed implements OnModuleDestroy {
  private readonly logger = new Logger('console');
  private readonly listeners = new Set<Listener>();
  private timer: NodeJS.Timeout | undefined;
  private lastSeq: number | undefined;
  private readonly watched = new Map<number, string>();
  private ticking = false;
  private sincePing = 0;

  constructor(@InjectRepository(EventEntity) private readonly events: Repository<EventEntity>) {}

  /** Messages: `ready` once the feed knows where it starts, then `event` (a summary) for each new or changed event. */
  listen(filter: EventFilter): Observable<MessageEvent> {
    return new Observable<MessageEvent>((out) => {
      const listener = { filter, out };
      this.listeners.add(listener);
      void this.start().then(
        () => out.next({ type: 'ready', data: { interval_ms: FEED_INTERVAL_MS } }),
        (error: Error) => out.error(error),
      );
      return () => {
        this.listeners.delete(listener);
        if (this.listeners.size === 0) this.stop();
      };
    });
  }

  get listening(): number {
    return this.listeners.size;
  }

  onModuleDestroy(): void {
    for (const { out } of this.listeners) out.complete();
    this.listeners.clear();
    this.stop();
  }

  private async start(): Promise<void> {
    if (this.timer) return;
    if (this.lastSeq === undefined) {
      const [newest] = await this.events.find({ select: { seq: true }, order: { seq: 'DESC' }, take: 1 });
      this.lastSeq ??= newest?.seq ?? 0;
    }
    this.timer ??= setInterval(() => void this.tick(), FEED_INTERVAL_MS);
    this.timer.unref();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.lastSeq = undefined;
    this.watched.clear();
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.lastSeq === undefined) return;
    this.ticking = true;
    try {
      const fresh = await this.events.find({ where: { seq: MoreThan(this.lastSeq) }, order: { seq: 'ASC' }, take: BATCH });
      const seen = this.watched.size > 0 ? await this.events.find({ where: { seq: In([...this.watched.keys()]) } }) : [];
      const changed = seen.filter((e) => this.watched.get(e.seq) !== e.status);
      if (fresh.length > 0) this.lastSeq = fresh[fresh.length - 1].seq;
      for (const event of [...changed, ...fresh]) this.publish(event);
      this.ping();
    } catch (error) {
      this.logger.warn({ msg: 'the live event feed could not read events', error: (error as Error).message });
    } finally {
      this.ticking = false;
    }
  }

  private publish(event: EventEntity): void {
    if (event.status === 'received') {
      this.watched.set(event.seq, event.status);
      if (this.watched.size > MAX_WATCHED) this.watched.delete(this.watched.keys().next().value as number);
    } else {
      this.watched.delete(event.seq);
    }
    const message: MessageEvent = { type: 'event', id: String(event.seq), data: eventSummary(event) };
    for (const { filter, out } of this.listeners) if (eventMatches(filter, event)) out.next(message);
  }

  private ping(): void {
    this.sincePing += FEED_INTERVAL_MS;
    if (this.sincePing < PING_EVERY_MS) return;
    this.sincePing = 0;
    for (const { out } of this.listeners) out.next({ type: 'ping', data: '' });
  }
}
