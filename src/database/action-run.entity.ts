import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

export type ActionRunStatus = 'pending' | 'running' | 'succeeded' | 'retrying' | 'failed' | 'skipped' | 'cancelled';

/**
 * One action of one execution. Its `id` is the Idempotency-Key of every attempt,
 * so a retry after a crash or a timeout never causes a second effect.
 */
@Entity('action_runs')
@Index('idx_action_runs_due', ['status', 'nextAttemptAt'])
@Index('idx_action_runs_execution', ['executionId', 'position'])
// SQLite also has idx_action_runs_created (created_at, id), for the admin API's list (migration 1766300000000).
export class ActionRunEntity {
  @PrimaryColumn({ type: 'varchar', length: 36 })
  id!: string;

  @Column({ name: 'execution_id', type: 'varchar', length: 36 })
  executionId!: string;

  @Column({ name: 'event_seq', type: 'integer' })
  eventSeq!: number;

  @Column({ name: 'resource_key', type: 'varchar', length: 300, nullable: true })
  resourceKey!: string | null;

  /** For a creating request, what it could create (causal-scope.ts), recorded before it is sent. */
  @Column({ name: 'scope_kind', type: 'varchar', length: 40, nullable: true })
  scopeKind!: string | null;

  @Column({ name: 'scope_parent', type: 'varchar', length: 300, nullable: true })
  scopeParent!: string | null;

  @Column({ name: 'rule_id', type: 'varchar', length: 100 })
  ruleId!: string;

  /** Index of the action in the rule's list; actions of one execution run in this order. */
  @Column({ type: 'integer' })
  position!: number;

  @Column({ name: 'action_id', type: 'varchar', length: 100, nullable: true })
  actionId!: string | null;

  @Column({ type: 'varchar', length: 40 })
  type!: string;

  @Column({ type: 'varchar', length: 20 })
  status!: ActionRunStatus;

  @Column({ type: 'integer', default: 0 })
  attempts!: number;

  @Column({ name: 'next_attempt_at', type: 'varchar', length: 30 })
  nextAttemptAt!: string;

  @Column({ name: 'lease_owner', type: 'varchar', length: 64, nullable: true })
  leaseOwner!: string | null;

  @Column({ name: 'lease_until', type: 'varchar', length: 30, nullable: true })
  leaseUntil!: string | null;

  /** JSON: the request as rendered for the last attempt (method, path, body). */
  @Column({ type: 'text', nullable: true })
  request!: string | null;

  @Column({ name: 'response_status', type: 'integer', nullable: true })
  responseStatus!: number | null;

  /** JSON: the service's answer body on success. */
  @Column({ type: 'text', nullable: true })
  response!: string | null;

  @Column({ name: 'error_code', type: 'varchar', length: 100, nullable: true })
  errorCode!: string | null;

  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage!: string | null;

  @Column({ name: 'created_at', type: 'varchar', length: 30 })
  createdAt!: string;

  @Column({ name: 'updated_at', type: 'varchar', length: 30 })
  updatedAt!: string;

  /** One item of a `forEach` action: its index, and the item as JSON (`item`/`index` in its templates). */
  @Column({ name: 'item_index', type: 'integer', nullable: true })
  itemIndex!: number | null;

  @Column({ type: 'text', nullable: true })
  item!: string | null;
}
