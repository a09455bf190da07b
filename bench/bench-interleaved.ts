/**
 * Closed loops taken in turns: the reference server and the engine on each
 * database are started together, each warmed up in turn, and then each timed
 * run is cut into `--slices` slices sent in the order R S P, P S R, R S P …,
 * one system at a time, each slice drained before the next one starts. A
 * system's figures are its slices added up (bench-closed.ts `figures`).
 *
 * Why: this shared machine's speed moves, every process alike. Session 69
 * found the same engine's main-thread CPU per event 216–352 µs from run to
 * run, and the reference's 87–145 µs, while two engines measured at the same
 * moment (`npm run bench:pair`, 24 rounds with 16 fresh processes) never
 * differed by more than 6 %: the machine was slower at some moments, not the
 * process. Measured one after the other, a minute apart, each system took
 * its own minute; taken in turns, seconds apart, they share the slow minutes
 * as the targets' ratios assume. The machine also moves within seconds (the
 * reference's slices of 2.5 s in one run: 2,187, 4,371, 4,862 and 4,355
 * events/s), so short slices match moments better: the engine's ratio to the
 * reference over that session's runs, one after the other, 0.47–0.70×
 * (standard deviation 0.084, 8 runs); 4 slices of 2.5 s, 0.46–0.70× (0.066,
 * 13); 10 slices of 1 s, 0.48–0.60× (0.038, 8), the median the same (0.53–
 * 0.55×). Hence 10 by default. `--slices 1` measures each
 * system in turn, a fresh process each, as the benchmark did before.
 *
 * The in-memory flow engine is not taken in turns: the backlog it acknowledges
 * and has not done goes on for seconds after its sending stops, and would run
 * in the others' slices.
 */
import type { BenchDatabase, DatabaseName } from './bench-databases.js';
import type { BenchEngine } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { WebhookPoster, type ConnectionMode } from './bench-load.js';
import {
  figures, perEvent, postgresStartup, timedEventCount, timedRun, waitingWork, warmUp, type ClosedLoopFigures, type LoadKind, type Timed,
} from './bench-closed.js';
import { BackendCpu, hotUpdates, settledCounters, subtract, type PgCounters } from './bench-pgstats.js';
import { startSystem, type ScenarioContext, type SystemName } from './bench-systems.js';

interface Lane {
  system: SystemName;
  database: BenchDatabase;
  target: BenchEngine;
  poster: WebhookPoster;
  remaining: () => Promise<number>;
  /** Events prepared for each slice (enough for it, from the warm-up's rate). */
  perSlice: number;
  slices: Timed[];
  warmedUp: number;
  /** PostgreSQL: its counters before the engine started. */
  before?: PgCounters;
  failed: boolean;
}

/** The order in which slice `k` (from 0) visits the systems: forwards, then backwards, and so on. */
export function sliceOrder<T>(items: readonly T[], k: number): T[] {
  return k % 2 === 0 ? [...items] : [...items].reverse();
}

/** A fresh database for each of `names`, all held while `work` runs, each dropped afterwards whatever happens. */
export function withDatabases<T>(ctx: ScenarioContext, names: DatabaseName[], work: (databases: BenchDatabase[]) => Promise<T>, held: BenchDatabase[] = []): Promise<T> {
  if (held.length === names.length) return work(held);
  return ctx.withDatabase(names[held.length]!, (db) => withDatabases(ctx, names, work, [...held, db]));
}

async function startLane(ctx: ScenarioContext, system: SystemName, kind: LoadKind, mode: ConnectionMode, database: BenchDatabase, lanes: Lane[]): Promise<void> {
  const { options } = ctx;
  const before = system === 'postgres' && kind === 'e2e' ? await settledCounters(options.postgresUrl!, database.where) : undefined;
  const target = await startSystem(ctx, system, database, `${kind}-${mode}`);
  const poster = new WebhookPoster(target.url, options.connections, mode);
  const lane: Lane = {
    system, database, target, poster, remaining: waitingWork(system, database), perSlice: 0, slices: [], warmedUp: 0, before, failed: false,
  };
  // Held from here on, so that it is stopped whatever happens next.
  lanes.push(lane);
  ctx.progress(`closed loop ${kind} (${system}, ${mode}): warming up …`);
  const warm = await warmUp(ctx, kind, poster, lane.remaining);
  lane.warmedUp = warm.acknowledged;
  lane.perSlice = Math.ceil(timedEventCount(ctx, warm.perSecond) / options.slices);
}

/** Each system's slices, in the order R S P, P S R …; a system that fails is reported and left out from then on. */
async function runSlices(ctx: ScenarioContext, lanes: Lane[], kind: LoadKind, failed: (system: SystemName, error: unknown) => void): Promise<void> {
  const { options } = ctx;
  const seconds = options.durationS / options.slices;
  for (let k = 0; k < options.slices; k++) {
    for (const lane of sliceOrder(lanes, k)) {
      if (lane.failed) continue;
      try {
        // The fake service follows one run at a time: each slice is one, with events of its own.
        const prefix = runPrefix(`${kind}_${lane.system}_${k}`);
        const events = signedEvents(kind === 'e2e' ? 'matching' : 'unmatched', prefix, lane.perSlice);
        const arrivals = await ctx.fake.beginRun(prefix, events.length);
        const backends = lane.system === 'postgres' ? new BackendCpu(options.postgresUrl!, lane.database.where) : undefined;
        lane.slices.push(await timedRun(ctx, lane.target, events, lane.poster, { kind, arrivals, remaining: lane.remaining, backends, seconds }));
      } catch (error) {
        lane.failed = true;
        failed(lane.system, error);
      }
    }
  }
}

/** PostgreSQL end to end: transactions and rows read an event, from its counters (the engine stopped). */
async function postgresFigures(ctx: ScenarioContext, lane: Lane, f: ClosedLoopFigures, startup: PgCounters): Promise<void> {
  const url = ctx.options.postgresUrl!;
  const total = subtract(subtract(await settledCounters(url, lane.database.where), lane.before!), startup);
  const updates = await hotUpdates(url, lane.database.where).catch(() => undefined);
  f.postgres = perEvent(total, lane.warmedUp + f.acknowledged - f.leftAfterDrain, updates);
}

/**
 * The closed loop of `kind` on each of `systems` (each on the database of the same index), taken in turns; a system
 * that fails (to start, or in a slice) is reported through `failed` and left out, the others go on.
 */
export async function runInterleaved(
  ctx: ScenarioContext, systems: SystemName[], kind: LoadKind, mode: ConnectionMode, databases: BenchDatabase[],
  failed: (system: SystemName, error: unknown) => void,
): Promise<ClosedLoopFigures[]> {
  // Measured before anything starts: it starts an engine of its own.
  const startup = systems.includes('postgres') && kind === 'e2e' ? await postgresStartup(ctx) : undefined;
  const lanes: Lane[] = [];
  const results: Array<{ lane: Lane; f: ClosedLoopFigures }> = [];
  try {
    for (const [i, system] of systems.entries()) {
      await startLane(ctx, system, kind, mode, databases[i]!, lanes).catch((error: unknown) => {
        const lane = lanes.find((l) => l.system === system);
        if (lane) lane.failed = true;
        failed(system, error);
      });
    }
    ctx.progress(`closed loop ${kind} (${mode}): ${lanes.filter((l) => !l.failed).map((l) => l.system).join(', ')} in turns, ${ctx.options.slices} slices each …`);
    await runSlices(ctx, lanes, kind, failed);
    for (const lane of lanes.filter((l) => !l.failed && l.slices.length > 0)) {
      results.push({ lane, f: figures(ctx, { system: lane.system, kind, mode }, lane.target, lane.slices) });
    }
  } finally {
    for (const lane of lanes) lane.poster.close();
    await Promise.all(lanes.map((lane) => lane.target.stop()));
  }
  for (const { lane, f } of results) if (lane.before !== undefined && startup !== undefined) await postgresFigures(ctx, lane, f, startup);
  return results.map((r) => r.f);
}
