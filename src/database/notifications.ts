/**
 * Changes to the stored rules reach every replica at once through PostgreSQL's
 * LISTEN/NOTIFY.
 *
 * A write that changes `api_rules` or `rule_states` calls `notifyRulesChanged`
 * inside its transaction: PostgreSQL delivers the notification when the
 * transaction commits, after the change is visible, and never for a change
 * rolled back. Each replica keeps one connection of its own that LISTENs
 * (`ChannelListener`), outside TypeORM's pool: a pooled connection is handed to
 * other work, and a listener's must stay put. Notifications sent while that
 * connection is down are lost, so the listener reconnects with capped backoff
 * and says `resumed` for its owner to read everything again. The registry's
 * polling stays as the fallback whatever happens here. SQLite has one engine
 * process per database, and none of this.
 */
import { Logger } from '@nestjs/common';
import type pg from 'pg';
import type { EntityManager } from 'typeorm';
import { kindOf, queryRows } from './sql.js';

export const RULES_CHANNEL = 'engine_rules';

/** How a listener's connection shows in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = 'engine-rules-listener';

const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 5_000;
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Inside a write's transaction that changed the rules or their overrides: the
 * other replicas hear of it at commit. `origin` names the writer, which has
 * applied its own change already and ignores its own notification.
 */
export async function notifyRulesChanged(manager: EntityManager, origin: string): Promise<void> {
  if (kindOf(manager.connection) !== 'postgres') return;
  await queryRows(manager, 'SELECT pg_notify(?, ?)', [RULES_CHANNEL, origin]);
}

export interface ChannelEvents {
  /** A notification on the channel, with its payload. */
  notified(payload: string): void;
  /** Listening again after an outage: notifications sent meanwhile were lost. */
  resumed(): void;
}

/** A message about the connection without the password of the URL it was opened with. */
export function withoutPassword(message: string, url: string): string {
  let password = '';
  try {
    password = new URL(url).password;
  } catch {
    return message;
  }
  if (password === '') return message;
  const forms = new Set([password, decodeURIComponent(password)]);
  let safe = message;
  for (const form of forms) safe = safe.split(form).join('***');
  return safe;
}

type Log = Pick<Logger, 'log' | 'warn'>;

/** One LISTENing connection to PostgreSQL, kept up until `close()`. */
export class ChannelListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retryMs = FIRST_RETRY_MS;
  private outage = false;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly events: ChannelEvents,
    private readonly logger: Log = new Logger('database'),
  ) {}

  /** The first attempt to listen; one that fails is an outage like any later one (retried, logged once), not a failed start. */
  start(): Promise<void> {
    return this.connect();
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    // Loaded here, not at start: on SQLite nothing listens, and pg costs every start some 25 ms.
    const { Client } = (await import('pg')).default;
    const client = new Client({
      connectionString: this.url,
      application_name: LISTENER_APPLICATION_NAME,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    let gone = false;
    const lost = (error?: Error) => {
      if (gone) return;
      gone = true;
      this.lost(client, error);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (message) => {
      if (message.channel === this.channel) this.events.notified(message.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
    } catch (error) {
      lost(error as Error);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.retryMs = FIRST_RETRY_MS;
    if (this.outage) {
      this.outage = false;
      this.logger.log({ msg: 'rule change notifications: listening again' });
      this.events.resumed();
    }
  }

  private lost(client: pg.Client, error: Error | undefined): void {
    if (this.client === client) this.client = undefined;
    void client.end().catch(() => undefined);
    if (this.closed) return;
    if (!this.outage) {
      this.outage = true;
      this.logger.warn({
        msg: 'rule change notifications: connection lost, reconnecting (changes by other replicas arrive by polling meanwhile)',
        error: withoutPassword(error?.message ?? 'the connection ended', this.url),
      });
    }
    this.timer = setTimeout(() => void this.connect(), this.retryMs);
    this.timer.unref();
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }
}
