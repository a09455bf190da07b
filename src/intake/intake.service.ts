import { scopeOfEvent } from '../causal-scope.js';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '../clock.js';
import { ENGINE_CONFIG, type EngineConfig } from '../config/config.js';
import { DomainError } from '../errors.js';
import { randomUUID } from 'node:crypto';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { parseEnvelope, type EventEnvelope } from './envelope.js';
import { safeJsonParse } from '../json.js';
import { EventEntity } from '../database/event.entity.js';
import { Metrics } from '../observability/metrics.js';
import { EventWriter, type WriteOutcome } from './event-writer.js';
import { verifySignature } from './signature.js';

export interface IntakeResult {
  id: string;
  status: WriteOutcome;
}

@Injectable()
export class IntakeService {
  private accepting = true;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly writer: EventWriter,
    @InjectRepository(EventEntity) private readonly events: Repository<EventEntity>,
    private readonly metrics: Metrics,
  ) {}

  /** Refuse new webhooks (503) from now on: the engine is shutting down. */
  stopAccepting(): void {
    this.accepting = false;
  }

  /** Checks the secret is configured before the body is even read. */
  assertReady(): void {
    if (!this.accepting) throw new DomainError('shutting_down', 'the engine is shutting down; deliver again later');
    if (this.config.webhookSecrets.length === 0) {
      throw new DomainError('webhook_secret_not_configured', 'WEBHOOK_SECRET is not set, so no webhook can be verified');
    }
  }

  async receiveWebhook(rawBody: Buffer, signature: string | undefined): Promise<IntakeResult> {
    try {
      return await this.verifyAndAccept(rawBody, signature);
    } catch (error) {
      if (error instanceof DomainError) this.metrics.eventReceived('unknown', error.code);
      throw error;
    }
  }

  private async verifyAndAccept(rawBody: Buffer, signature: string | undefined): Promise<IntakeResult> {
    this.assertReady();
    const check = verifySignature(rawBody, signature, {
      scheme: this.config.webhookSignatureScheme,
      secrets: this.config.webhookSecrets,
      toleranceSeconds: this.config.webhookToleranceSeconds,
      now: this.clock.now(),
    });
    if (!check.ok) throw new DomainError(check.code, check.reason);
    return this.accept(rawBody, 'webhook');
  }

  /**
   * Stores a copy of an earlier event as a new event (its own id, linked to the
   * original), so it is evaluated again by the rules as they are now.
   */
  async replay(eventId: string): Promise<IntakeResult & { replay_of: string }> {
    const original = await this.events.findOneBy({ eventId });
    if (!original) throw new DomainError('not_found', `no event with id ${eventId}`);
    const envelope = safeJsonParse(original.payload) as EventEnvelope;
    // Bounded, so a replay of an event with the longest allowed id still fits.
    const id = `${eventId.slice(0, 200)}:replay:${randomUUID().slice(0, 8)}`;
    const payload = JSON.stringify({ ...envelope, id });
    const status = await this.writer.write({
      eventId: id,
      type: original.type,
      resourceKey: original.resourceKey,
      scope: scopeOfEvent(original.resourceKey, envelope.data),
      source: 'replay',
      payload,
      replayOf: eventId,
    });
    return { id, status, replay_of: eventId };
  }

  /** Stores an event that needs no signature (admin injection). */
  async accept(rawBody: Buffer, source: 'webhook' | 'admin'): Promise<IntakeResult> {
    const parsed = parseEnvelope(rawBody);
    if (!parsed.ok) throw new DomainError(parsed.code, parsed.message);
    const { envelope, resourceKey, scope, text } = parsed;
    const status = await this.writer.write({
      eventId: envelope.id,
      type: envelope.type,
      resourceKey,
      scope,
      source,
      payload: text,
      envelope,
    });
    this.metrics.eventReceived(envelope.type, status);
    return { id: envelope.id, status };
  }
}
