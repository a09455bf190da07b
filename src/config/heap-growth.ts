/**
 * How far V8 lets the engine's old space fill with garbage before a major
 * collection.
 *
 * Under load the engine holds about 42 MB of live heap (34 MB of it idle:
 * modules, code, rules), but allocates some 90 kB per event, and objects of
 * events and requests in flight are promoted to the old space before they die.
 * By default V8 lets the old space grow to 2–4 times what survived the last
 * major collection before the next one, so under the benchmark's load the
 * process peaked at 220–250 MB of RSS with only ~42 MB live. Growing by 25%
 * instead bounds the peak at 185–190 MB (old space ~62 MB) for a few percent of
 * the main thread in more frequent major collections (README, Performance: Memory).
 *
 * V8 reads this flag each time it sets the next collection's limit, so setting
 * it once the process runs takes effect from the next collection. An operator
 * who starts node with `--heap-growing-percent` keeps their own value.
 *
 * The young generation is the other part of the peak: V8 grows each of its two
 * semi-spaces up to 16 MB under the engine's allocation rate. On SQLite, at 8
 * MB the peak RSS under load is about 15 MB lower (session 44: 168–169 MB end
 * to end against 183–184, 188–189 MB in the open loop that falls behind
 * against 204–206) for about 1 % more CPU an event. On PostgreSQL the same
 * bound costs about a tenth of the throughput (session 45, closed loop, runs in
 * turn: 2,490 events/s on average over nine runs at 8 MB against 2,786 over six
 * at 16; the collector's threads 57–81 µs an event against 46–52): an event's
 * objects live across the server's round trips (webhook to action about 50 ms
 * against 14 on SQLite), so a young generation half the size is collected twice
 * as often with as much to copy each time, and promotes more to the old space
 * for the major collections. There it stays at 16 MB (peak RSS 166–175 MB).
 * That size is read only when the heap is set up, so it cannot be set here:
 * `npm start` (and the tests and the benchmark) start node with the options
 * `engineNodeOptions` gives for the database (scripts/node-options.mjs prints
 * them for `npm start`), and the engine says so at start when it was started
 * without them (`youngGenerationNote`).
 */
import { setFlagsFromString } from 'node:v8';
import { databaseKind, type DatabaseKind } from './database-kind.js';

export const HEAP_GROWING_PERCENT = 25;
export const HEAP_GROWTH_FLAG = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;

/** Whether node was started with the V8 option `name` (as `heap-growing-percent`), in either spelling (`-` or `_`). */
function givenToNode(execArgv: readonly string[], name: string): boolean {
  const option = new RegExp(`^--${name.replace(/-/g, '[-_]')}(=|$)`);
  return execArgv.some((arg) => option.test(arg));
}

/** Whether node was started with its own `--heap-growing-percent` (either spelling). */
export function heapGrowthSetByUser(execArgv: readonly string[]): boolean {
  return givenToNode(execArgv, 'heap-growing-percent');
}

/** Sets the engine's heap growth unless node was started with one; returns whether it did. */
export function boundHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (heapGrowthSetByUser(execArgv)) return false;
  setFlagsFromString(HEAP_GROWTH_FLAG);
  return true;
}

/** Each semi-space of the young generation at most, in MB, by database (see above). */
const SEMI_SPACE_MB: Record<DatabaseKind, number> = { sqlite: 8, postgres: 16 };

/**
 * The options `npm start` gives node for the database `databaseUrl` names (DATABASE_URL as the engine reads it: blank
 * or unset is SQLite): scripts/node-options.mjs prints them for package.json's start line, and test/npm-start.e2e-spec.ts
 * checks that the engine `npm start` runs gets them.
 */
export function engineNodeOptions(databaseUrl: string | undefined): readonly string[] {
  const url = databaseUrl?.trim() ?? '';
  return [`--max-semi-space-size=${SEMI_SPACE_MB[databaseKind(url)]}`];
}

/** A warning for the log when node was started without a bound on the young generation (undefined: it was given one). */
export function youngGenerationNote(databaseUrl: string, execArgv: readonly string[] = process.execArgv): string | undefined {
  if (givenToNode(execArgv, 'max-semi-space-size')) return undefined;
  const options = engineNodeOptions(databaseUrl).join(' ');
  return `node was started without ${options} (npm start passes it for this database): peak memory or CPU under load is higher (README, Performance: Memory)`;
}
