import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

export type ExecutionStatus = 'running' | 'succeeded' | 'failed' | 'throttled' | 'skipped';

/** One rule that matched one event, with the actions it had at that moment. */
@Entity('executions')
@Index('idx_executions_event', ['eventSeq'])
@Index('idx_executions_rule', ['ruleId', 'createdAt'])
@Index('idx_executions_status', ['status', 'createdAt'])
@Index('idx_executions_throttle', ['ruleId', 'throttleKey', 'createdAt'])
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
}
