/**
 * Start-up: from spawning `node dist-bench/src/main.js` to the first 200 from
 * `/health/ready` (database answering, rules loaded), polled every 10 ms, with
 * `--rules` rule files (1,000) in a fresh RULES_DIR, on a fresh SQLite file
 * (migrations included) and again on the same, migrated, file (a restart). One
 * rule file on a fresh file is measured too, for comparison.
 *
 * A full run takes five such pairs of starts (a --quick one a single fresh
 * start) and reports their medians and ranges: one start lasts a second or two,
 * short enough for a slow moment of this shared machine to take all of it
 * (session 70's second full run measured 2.12 s where the part alone measured
 * 1.15–1.74 s), as a closed loop's ten slices are not.
 */
import { rmSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { spawnEngine } from '../test/support/engine.js';
import { freePort } from '../test/support/ports.js';
import type { BenchDatabase } from './bench-databases.js';
import { spreadOf, type Spread } from './bench-pair.js';
import { BENCH_RULE, benchEnv, ENGINE_MAIN, writeRules } from './bench-engine.js';
import { ruleDefinitions } from './bench-matching.js';
import { epochNow, type ScenarioContext } from './bench-systems.js';

export interface StartupFigures {
  ruleFiles: number;
  /** Medians over the starts: on a fresh database (migrations run) / on the same database again. */
  freshSeconds: number;
  restartSeconds?: number;
  /** The same, each start's seconds summed up: median and range, with how many starts. */
  fresh?: Spread & { starts: number };
  restart?: Spread & { starts: number };
}

/** Pairs of starts (fresh, then restart) in a full run. */
export const STARTS = 5;

const POLL_MS = 10;

/** Polls /health/ready from the moment of spawning; resolves with the seconds until it answered 200. */
async function readyAfter(url: string, spawnedAt: number, gaveUp: () => boolean): Promise<number> {
  for (;;) {
    if (await fetch(`${url}/health/ready`).then((r) => r.ok, () => false)) return (epochNow() - spawnedAt) / 1000;
    if (gaveUp()) throw new Error('the engine did not become ready');
    await delay(POLL_MS);
  }
}

async function timeStart(ctx: ScenarioContext, db: BenchDatabase, rulesDir: string): Promise<number> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = benchEnv({ layout: 'child', databaseUrl: db.url, serviceUrl: ctx.fake.url }, rulesDir);
  let spawnedAt = 0;
  let failed = false;
  let ready: Promise<number> | undefined;
  const onSpawn = (child: Parameters<typeof ctx.cleanup.trackChild>[0]) => {
    spawnedAt = epochNow();
    ctx.cleanup.trackChild(child);
    ready = readyAfter(url, spawnedAt, () => failed);
    // Awaited below on success; when the spawn fails, that failure is the one reported.
    ready.catch(() => undefined);
  };
  const engine = await spawnEngine(env, port, { script: ENGINE_MAIN, onSpawn }).catch((error: Error) => {
    failed = true;
    throw error;
  });
  const stop = ctx.cleanup.add(`stop engine (pid ${engine.child.pid})`, () => engine.kill('SIGTERM'));
  try {
    return await ready!;
  } finally {
    failed = true;
    await stop();
  }
}

export async function runStartup(ctx: ScenarioContext, ruleFiles: number): Promise<StartupFigures> {
  ctx.progress(`start-up: ${ruleFiles.toLocaleString('en-US')} rule files …`);
  const rules = ruleFiles === 1 ? [BENCH_RULE] : ruleDefinitions(ruleFiles);
  const rulesDir = writeRules(ctx.cleanup, rules);
  try {
    const fresh: number[] = [];
    const restart: number[] = [];
    for (let i = 0; i < (ctx.options.quick ? 1 : STARTS); i++) {
      await ctx.withDatabase('sqlite', async (db) => {
        fresh.push(await timeStart(ctx, db, rulesDir));
        if (!ctx.options.quick) restart.push(await timeStart(ctx, db, rulesDir));
      });
    }
    return startupFigures(ruleFiles, fresh, restart);
  } finally {
    rmSync(rulesDir, { recursive: true, force: true });
  }
}

/** Each start's seconds, fresh and restarting (none when not measured), summed up by their medians. */
export function startupFigures(ruleFiles: number, fresh: number[], restart: number[]): StartupFigures {
  const summed = (all: number[]) => ({ ...spreadOf(all), starts: all.length });
  const figures: StartupFigures = { ruleFiles, freshSeconds: spreadOf(fresh).median, fresh: summed(fresh) };
  return restart.length === 0 ? figures : { ...figures, restartSeconds: spreadOf(restart).median, restart: summed(restart) };
}
