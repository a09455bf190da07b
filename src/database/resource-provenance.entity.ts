import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A resource an engine action created or changed, and how deep in a chain of
 * engine-caused events that action was: an event about this resource soon after
 * is the engine's own doing (loop protection, SPEC section 6).
 */
@Entity('resource_provenance')
@Index('idx_provenance_changed', ['changedAt'])
export class ResourceProvenanceEntity {
  @PrimaryColumn({ name: 'resource_key', type: 'varchar', length: 300 })
  resourceKey!: string;

  /** Depth of the event whose action touched the resource; an event about it has depth + 1. */
  @Column({ type: 'integer' })
  depth!: number;

  @Column({ name: 'action_run_id', type: 'varchar', length: 36 })
  actionRunId!: string;

  @Column({ name: 'rule_id', type: 'varchar', length: 100 })
  ruleId!: string;

  @Column({ name: 'changed_at', type: 'varchar', length: 30 })
  changedAt!: string;
}
