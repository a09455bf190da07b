import { Column, Entity, PrimaryColumn } from 'typeorm';

/** The last version of a resource seen in an event: the `changes` fact diffs against it. */
@Entity('resource_snapshots')
export class ResourceSnapshotEntity {
  @PrimaryColumn({ name: 'resource_key', type: 'varchar', length: 300 })
  resourceKey!: string;

  @Column({ type: 'text' })
  payload!: string;

  @Column({ name: 'event_seq', type: 'integer' })
  eventSeq!: number;

  @Column({ name: 'updated_at', type: 'varchar', length: 30 })
  updatedAt!: string;
}
