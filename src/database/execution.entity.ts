import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

export type ExecutionStatus = 'running' | 'succeeded' | 'failed' | 'throttled' | 'skipped' | 'waiting' | 'stopped' | 'cancelled' | 'debounced';

export const EXECUTION_STATUSES: readonly ExecutionStatus[] = ['running', 'succeeded', 'failed', 'throttled', 'skipped', 'waiting', 'stopped', 'cancelled', 'debounced'];

/** One rule that matched one event, with the actions it had at that moment. */
@Entity('executions')
@Index('idx_executions_event', ['eventSeq'])
@Index('idx_executions_rule', ['ruleId', 'createdAt'])
// SQLite only: PostgreSQL tests no status in any index of executions (migration 1766100000000).
@Index('idx_executions_status', ['status', 'createdAt'])
@Index('idx_executions_created', ['createdAt', 'id'])
@Index('idx_executions_throttle', ['ruleId', 'throttleKey', 'createdAt'], { where: 'throttle_key IS NOT NULL' })
@Index('idx_executions_debounced_into', ['debouncedInto'], { where: 'debounced_into IS NOT NULL' })
export class ExecutionEntity {
  @PrimaryColumn({ type: 'varchar', length: 36 })
  id!: string;

  @Column({ name: 'event_seq', type: 'integer' })
  eventSeq!: number;

  @Column({ name: 'event_id', type: 'varchar', length: 255 })
  eventId!: string;

  @Column({ name: 'rule_id', type: 'varchar', length: 100 })
  ruleId!: string;

  @Column({ name: 'rule_version', type: 'varchar', length: 32 })
  ruleVersion!: string;

  @Column({ type: 'varchar', length: 20 })
  status!: ExecutionStatus;

  /** JSON: each condition's result when the rule matched. */
  @Column({ type: 'text' })
  conditions!: string;

  /** JSON RuleSnapshot: the rule as it was when it matched, so a reload mid-run changes nothing. */
  @Column({ name: 'rule_snapshot', type: 'text' })
  ruleSnapshot!: string;

  @Column({ type: 'text', nullable: true })
  error!: string | null;

  /** The rendered `options.throttle.key` when the rule has a throttle. */
  @Column({ name: 'throttle_key', type: 'varchar', length: 300, nullable: true })
  throttleKey!: string | null;

  @Column({ name: 'created_at', type: 'varchar', length: 30 })
  createdAt!: string;

  @Column({ name: 'finished_at', type: 'varchar', length: 30, nullable: true })
  finishedAt!: string | null;

  /** While `waiting`: when its delay ends (SPEC 11). */
  @Column({ name: 'resume_at', type: 'varchar', length: 30, nullable: true })
  resumeAt!: string | null;

  /** `cancelled`: the id of the event that cancelled it (`admin` when an operator did). */
  @Column({ name: 'cancelled_by', type: 'varchar', length: 255, nullable: true })
  cancelledBy!: string | null;

  /** The rendered `options.debounce.key`. */
  @Column({ name: 'debounce_key', type: 'varchar', length: 300, nullable: true })
  debounceKey!: string | null;

  /** `debounced`: the execution that ran instead (the one of the last event). */
  @Column({ name: 'debounced_into', type: 'varchar', length: 36, nullable: true })
  debouncedInto!: string | null;

  /** JSON: the values of the facts the rule's conditions used (`facts.<name>` in templates). */
  @Column({ type: 'text', nullable: true })
  facts!: string | null;
}
