/**
 * The life cycle every end-to-end suite shares, written once: a fresh database
 * of the kind under test, a simulator, and the engines a test starts (in this
 * process, as child processes, or wired both ways with the simulator); all of
 * them stopped afterwards, the last started first, and the database dropped.
 *
 *   const kinds = await databasesUnderTest('pipeline');  // SQLite, and PostgreSQL when it answers
 *
 *   describe.each(kinds)('the main path on $name', (kind) => {
 *     const rig = useRig(kind);                            // fresh parts for each test
 *
 *     it('creates the follow-up task', async () => {
 *       const engine = await rig.start([followUp]);        // on rig.db, calling rig.sim
 *       …rig.sim.requests…
 *     });
 *   });
 *
 * Options: `per: 'block'` sets up once for the describe block `useRig` is
 * called in (and tears down after its last test) instead of around each test;
 * `engine` starts one engine in that set-up, then reachable as `rig.engine`;
 * `simulator` changes the simulator's options, or is false for a suite that
 * needs none (or starts its own with `rig.roundTrip`).
 */
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/simulator.js';
import type { DatabaseKindUnderTest, TestDatabase } from './databases.js';
import { rulesDir, spawnEngine, startEngine, type EngineProcess, type RunningEngine } from './engine.js';
import { onFreePort } from './ports.js';
import { startRoundTrip, type RoundTrip, type RoundTripOptions } from './round-trip.js';

export type Env = Record<string, string | undefined>;

/** Rule definitions (written to a fresh folder), or the path of a rules folder (to share one between engines). */
export type Rules = unknown[] | string;

/** Creating and dropping a PostgreSQL database takes longer than jest's 5 s default for hooks allows on a busy machine. */
export const HOOK_TIMEOUT_MS = 30_000;

export interface RigOptions {
  /** 'test' (default): fresh parts around each test; 'block': once for the describe block. */
  per?: 'test' | 'block';
  /** The simulator's options, over `{ seed: true }`; false: no simulator. */
  simulator?: SimulatorOptions | false;
  /** An engine in this process, started by the set-up: its rules and environment. */
  engine?: { rules?: Rules; env?: Env };
}

export interface Rig {
  /** The test database (its `url`, to open it from the test). */
  readonly db: TestDatabase;
  readonly sim: Simulator;
  /** The engine the set-up started (option `engine`). */
  readonly engine: RunningEngine;
  /** The environment of an engine on this rig: its database, the simulator's API, the rules, then `env`. */
  env(rules?: Rules, env?: Env): Env;
  /** An engine in this process; stopped at tear-down unless the test stopped it. */
  start(rules?: Rules, env?: Env): Promise<RunningEngine>;
  /** `node dist/bundle/main.js` (`npm start`'s engine) as a child process, on a free port unless told; killed at tear-down. */
  spawn(rules?: Rules, env?: Env, port?: number): Promise<EngineProcess>;
  /** An engine and a simulator of its own that sends it webhooks (needs `simulator: false`); stopped at tear-down. */
  roundTrip(rules?: Rules, env?: Env, options?: RoundTripOptions): Promise<RoundTrip>;
  /** Runs `cleanup` at tear-down, before the parts set up earlier are stopped. */
  defer(cleanup: () => unknown): void;
}

interface Parts {
  db: TestDatabase;
  sim?: Simulator;
  engine?: RunningEngine;
}

/** Registers the set-up and tear-down hooks in the describe block it is called in, and returns the rig they maintain. */
export function useRig(kind: DatabaseKindUnderTest, options: RigOptions = {}): Rig {
  const { per = 'test', simulator = {}, engine: engineOptions } = options;
  const cleanups: Array<() => unknown> = [];
  let parts: Parts | undefined;

  const current = (what: string): Parts => {
    if (!parts) throw new Error(`rig.${what} is there only while a test of the block that called useRig runs`);
    return parts;
  };

  const baseEnv = (rules: Rules, env: Env, service: string | undefined): Env => ({
    DATABASE_URL: current('env').db.url,
    ...(service === undefined ? {} : { SERVICE_API_URL: service }),
    RULES_DIR: typeof rules === 'string' ? rules : rulesDir(rules),
    ...env,
  });

  const rig: Rig = {
    get db() {
      return current('db').db;
    },
    get sim() {
      const { sim } = current('sim');
      if (!sim) throw new Error('this rig has no simulator (simulator: false)');
      return sim;
    },
    get engine() {
      const { engine } = current('engine');
      if (!engine) throw new Error('this rig starts no engine by itself (option engine): use rig.start');
      return engine;
    },
    env: (rules = [], env = {}) => baseEnv(rules, env, current('env').sim?.url),
    async start(rules = [], env = {}) {
      const engine = await startEngine(rig.env(rules, env));
      cleanups.push(() => engine.stop());
      return engine;
    },
    async spawn(rules = [], env = {}, port) {
      const spawn = (at: number) => spawnEngine(rig.env(rules, env), at);
      const child = port !== undefined ? await spawn(port) : (await onFreePort(spawn)).started;
      cleanups.push(() => child.kill());
      return child;
    },
    async roundTrip(rules = [], env = {}, roundTripOptions = {}) {
      if (current('roundTrip').sim) throw new Error('rig.roundTrip starts a simulator of its own: use simulator: false');
      const both = await startRoundTrip(baseEnv(rules, env, undefined), roundTripOptions);
      cleanups.push(() => both.stop());
      return both;
    },
    defer(cleanup) {
      cleanups.push(cleanup);
    },
  };

  async function setUp(): Promise<void> {
    const db = await kind.create();
    cleanups.push(() => db.drop());
    parts = { db };
    if (simulator !== false) {
      const sim = await startSimulator({ seed: true, ...simulator });
      cleanups.push(() => sim.close());
      parts.sim = sim;
    }
    if (engineOptions) parts.engine = await rig.start(engineOptions.rules, engineOptions.env);
  }

  /** Runs every clean-up, the last registered first, even when one fails; then reports the first failure. */
  async function tearDown(): Promise<void> {
    parts = undefined;
    const failures: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  }

  if (per === 'test') {
    beforeEach(setUp, HOOK_TIMEOUT_MS);
    afterEach(tearDown, HOOK_TIMEOUT_MS);
  } else {
    beforeAll(setUp, HOOK_TIMEOUT_MS);
    afterAll(tearDown, HOOK_TIMEOUT_MS);
  }
  return rig;
}
