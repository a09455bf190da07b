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
 * semi-spaces up to 16 MB under the engine's allocation rate. At 8 MB the peak
 * RSS under load is about 15 MB lower (session 44: 168–169 MB end to end
 * against 183–184, 188–189 MB in the open loop that falls behind against
 * 204–206) for about 1 % more CPU an event. That size is read only when the
 * heap is set up, so it cannot be set from here: `npm start` (and the
 * benchmark) start node with ENGINE_NODE_OPTIONS, and the engine says so at
 * start when it was started without them (`youngGenerationNote`).
 */
import { setFlagsFromString } from 'node:v8';

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

/** The options `npm start` gives node (package.json; heap-growth.spec.ts holds the two together). */
export const ENGINE_NODE_OPTIONS: readonly string[] = ['--max-semi-space-size=8'];

/** A note for the start-up log when node was started without a bound on its young generation (either spelling). */
export function youngGenerationNote(execArgv: readonly string[] = process.execArgv): string | undefined {
  if (givenToNode(execArgv, 'max-semi-space-size')) return undefined;
  return `node was started without ${ENGINE_NODE_OPTIONS.join(' ')} (npm start passes it): peak memory under load is about 15 MB higher (README, Performance: Memory)`;
}
