import { Column, Entity, PrimaryColumn } from 'typeorm';

/** An operator's enable/disable override for a rule; it outlives reloads and restarts. */
@Entity('rule_states')
export class RuleStateEntity {
  @PrimaryColumn({ name: 'rule_id', type: 'varchar', length: 100 })
  ruleId!: string;

  @Column({ type: 'boolean' })
  enabled!: boolean;

  @Column({ name: 'updated_at', type: 'varchar', length: 30 })
  updatedAt!: string;
}
