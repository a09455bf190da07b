import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

export type EventStatus = 'received' | 'processed' | 'ignored' | 'failed' | 'loop_blocked';
export type EventSource = 'webhook' | 'admin' | 'schedule' | 'replay' | 'engine';

/**
 * One accepted event. `seq` orders events as received (the queue and the
 * per-resource ordering rely on it); `eventId` is the envelope's id and is
 * unique, which is what makes a redelivery a duplicate.
 */
@Entity('events')
@Index('idx_events_status_seq', ['status', 'seq'])
@Index('idx_events_resource_seq', ['resourceKey', 'seq'])
@Index('idx_events_type_seq', ['type', 'seq'])
export class EventEntity {
  @PrimaryGeneratedColumn({ name: 'seq' })
  seq!: number;

  @Column({ name: 'event_id', type: 'varchar', length: 255, unique: true })
  eventId!: string;

  @Column({ type: 'varchar', length: 200 })
  type!: string;

  /** `<kind>:<id>` of the resource the event is about (`task:tsk_1`), if any. */
  @Column({ name: 'resource_key', type: 'varchar', length: 300, nullable: true })
  resourceKey!: string | null;

  @Column({ type: 'varchar', length: 20 })
  status!: EventStatus;

  @Column({ type: 'varchar', length: 20 })
  source!: EventSource;

  /** The body exactly as received (for webhooks, the signed bytes as UTF-8). */
  @Column({ type: 'text' })
  payload!: string;

  /** Links in the chain of engine-caused events that led here (0: not caused by the engine). */
  @Column({ type: 'integer', default: 0 })
  depth!: number;

  /** About a resource an engine action created or changed in the last 10 minutes. */
  @Column({ name: 'self_caused', type: 'boolean', default: false })
  selfCaused!: boolean;

  /** About no resource, or one the engine has a snapshot of: it never waits behind the causal barrier. */
  @Column({ name: 'seen_resource', type: 'boolean', default: false })
  seenResource!: boolean;

  /** What could have caused it (causal-scope.ts): an unseen resource waits only for creating actions in this scope. */
  @Column({ name: 'scope_kind', type: 'varchar', length: 40, nullable: true })
  scopeKind!: string | null;

  @Column({ name: 'scope_parent', type: 'varchar', length: 300, nullable: true })
  scopeParent!: string | null;

  /** JSON `[{execution, rule}]`: the waiting executions this event cancelled (`options.cancelOn`). */
  @Column({ type: 'text', nullable: true })
  cancelled!: string | null;

  @Column({ name: 'replay_of', type: 'varchar', length: 255, nullable: true })
  replayOf!: string | null;

  @Column({ name: 'received_at', type: 'varchar', length: 30 })
  receivedAt!: string;

  @Column({ name: 'processed_at', type: 'varchar', length: 30, nullable: true })
  processedAt!: string | null;

  /** JSON: each rule that listened, whether it matched, and each condition's result. */
  @Column({ type: 'text', nullable: true })
  explanation!: string | null;

  @Column({ type: 'text', nullable: true })
  error!: string | null;

  @Column({ type: 'integer', default: 0 })
  attempts!: number;

  @Column({ name: 'next_attempt_at', type: 'varchar', length: 30 })
  nextAttemptAt!: string;

  @Column({ name: 'lease_owner', type: 'varchar', length: 64, nullable: true })
  leaseOwner!: string | null;

  @Column({ name: 'lease_until', type: 'varchar', length: 30, nullable: true })
  leaseUntil!: string | null;
}
