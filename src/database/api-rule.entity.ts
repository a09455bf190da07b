import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A rule created through the admin API rather than a file; it survives restarts. */
@Entity('api_rules')
export class ApiRuleEntity {
  @PrimaryColumn({ name: 'rule_id', type: 'varchar', length: 100 })
  ruleId!: string;

  /** The rule's JSON, exactly as validated. */
  @Column({ type: 'text' })
  definition!: string;

  @Column({ name: 'created_at', type: 'varchar', length: 30 })
  createdAt!: string;

  @Column({ name: 'updated_at', type: 'varchar', length: 30 })
  updatedAt!: string;
}
