/**
 * What the measured runs share: the systems under test (the reference server,
 * the in-memory flow engine, the engine on SQLite, the engine on PostgreSQL),
 * how each is started against the run's fake service, and how long a run waits
 * for the work acknowledged to be done.
 */
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Cleanup } from './bench-cleanup.js';
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import { startEngine, startFlowEngine, startReference, type BenchEngine } from './bench-engine.js';
import type { FakeService } from './bench-fake-service.js';
import type { BenchOptions } from './bench-options.js';
import type { PgCounters } from './bench-pgstats.js';

/**
 * `reference`: reference-server.ts (on SQLite); `flow`: the in-memory flow engine (flow-engine.ts, Node-RED), which
 * stores nothing; `sqlite` / `postgres`: the engine on that database.
 */
export type SystemName = 'reference' | 'flow' | DatabaseName;

/** The engine itself, on either database (not one of the systems it is measured against). */
export function isEngine(system: SystemName): system is DatabaseName {
  return system === 'sqlite' || system === 'postgres';
}

export interface ScenarioContext {
  options: BenchOptions;
  cleanup: Cleanup;
  fake: FakeService;
  /** A progress line (stderr: the figures go to stdout). */
  progress(line: string): void;
  /** Where engine CPU profiles go (one subfolder per run), when profiling was asked for. */
  profileDir?: string;
  /** A fresh database for `work`, dropped afterwards whatever happens. */
  withDatabase<T>(name: DatabaseName, work: (db: BenchDatabase) => Promise<T>): Promise<T>;
  /** What the engine's start-up and stop alone cost PostgreSQL (measured once, when first needed). */
  postgresStartup?: PgCounters;
}

export function systemLabel(system: SystemName): string {
  if (system === 'reference') return 'reference server (SQLite)';
  if (system === 'flow') return 'in-memory flow engine (Node-RED)';
  return `engine, ${system === 'sqlite' ? 'SQLite' : 'PostgreSQL'}`;
}

export function databaseFor(system: SystemName): DatabaseName {
  // The flow engine stores nothing: the SQLite file made for it stays empty.
  return system === 'postgres' ? 'postgres' : 'sqlite';
}

/** The system on `database` (the flow engine uses none), sending its actions to the run's fake service. */
export function startSystem(ctx: ScenarioContext, system: SystemName, database: BenchDatabase, part: string, readyTimeoutMs?: number): Promise<BenchEngine> {
  if (system === 'reference') return startReference(database.where, ctx.fake.url, ctx.cleanup);
  if (system === 'flow') return startFlowEngine(ctx.fake.url, ctx.cleanup);
  const profileDir = ctx.profileDir === undefined ? undefined : join(ctx.profileDir, `${part}-${system}`);
  return startEngine({ layout: ctx.options.layout, databaseUrl: database.url, serviceUrl: ctx.fake.url, profileDir, readyTimeoutMs }, ctx.cleanup);
}

/**
 * Polls `remaining` until it reaches 0 or `limitMs` passes; resolves with what
 * was left (0 when drained).
 */
export async function drain(remaining: () => number | Promise<number>, limitMs: number, intervalMs = 20): Promise<number> {
  const deadline = performance.now() + limitMs;
  for (;;) {
    const left = await remaining();
    if (left <= 0 || performance.now() >= deadline) return Math.max(0, left);
    await delay(intervalMs);
  }
}

/** Epoch milliseconds with sub-millisecond precision, the clock both the load generator and the fake service read. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}
