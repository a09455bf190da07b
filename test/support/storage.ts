/** A real database with the engine's schema, for storage-level suites (no Nest application). */
import { DataSource } from 'typeorm';
import type { Clock } from '../../src/clock.js';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { Database } from '../../src/database/database.service.js';

export async function openDatabase(url: string): Promise<Database> {
  const dataSource = new DataSource(dataSourceOptions(url));
  await dataSource.initialize();
  return new Database(dataSource);
}

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private current = new Date('2026-01-01T00:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}
