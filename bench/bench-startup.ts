/**
 * Start-up: from spawning `node dist-bench/src/main.js` to the first 200 from
 * `/health/ready` (database answering, rules loaded), polled every 10 ms, with
 * `--rules` rule files (1,000) in a fresh RULES_DIR, on a fresh SQLite file
 * (migrations included) and again on the same, migrated, file (a restart). One
 * rule file on a fresh file is measured too, for comparison.
 */
import { rmSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { spawnEngine } from '../test/support/engine.js';
import { freePort } from '../test/support/ports.js';
import type { BenchDatabase } from './bench-databases.js';
import { BENCH_RULE, benchEnv, ENGINE_MAIN, writeRules } from './bench-engine.js';
import { ruleDefinitions } from './bench-matching.js';
import { epochNow, type ScenarioContext } from './bench-systems.js';

export interface StartupFigures {
  ruleFiles: number;
  /** Fresh database (migrations run) / the same database again. */
  freshSeconds: number;
  restartSeconds?: number;
}

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
    return await ctx.withDatabase('sqlite', async (db) => {
      const freshSeconds = await timeStart(ctx, db, rulesDir);
      const restartSeconds = ctx.options.quick ? undefined : await timeStart(ctx, db, rulesDir);
      return { ruleFiles, freshSeconds, restartSeconds };
    });
  } finally {
    rmSync(rulesDir, { recursive: true, force: true });
  }
}
