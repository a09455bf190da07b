/**
 * `npm run bench:steps`: one engine on SQLite sent an open loop whose rate
 * changes in steps (`--steps 3000x10,4500x10,3000x30`: 3,000 webhooks a
 * second for 10 s, 4,500 for 10, 3,000 for 30), printing each second what
 * was sent, acknowledged and acted on, the backlog (acknowledged, not yet
 * acted on), the engine's CPU, how busy the whole machine was and the
 * engine's RSS; at the end, how long the engine took to act on everything.
 *
 * Why: `npm run bench`'s open loops run at one rate, and one that falls
 * behind says only that it did. An operator asks what happens after a burst:
 * whether the engine catches up once the rate falls back, how fast, and what
 * it holds meanwhile. Session 59 found it does, at about 3,400 events a
 * second with a backlog against 4,500–5,300 in that day's closed loops, its
 * RSS over 200 MB while it did (docs/performance-log.md).
 *
 *   npm run bench:steps -- [--steps RATExSECONDS,…] [--connections N]
 *
 * Matching events (one `POST /v1/tasks` each, to the lean fake service), as
 * the benchmark's end-to-end runs send them, over keep-alive connections
 * (512 by default, as the open loops). No warm-up: the first seconds show an
 * engine just started, V8 still compiling its hot code.
 */
import { parseArgs } from 'node:util';
import { isEntryFile } from '../src/cli/cli-output.js';
import { Cleanup } from './bench-cleanup.js';
import { createSqliteDatabase } from './bench-databases.js';
import { startEngine, type BenchEngine } from './bench-engine.js';
import { runPrefix, signedEvents } from './bench-events.js';
import { startFakeService, type FakeService } from './bench-fake-service.js';
import { WebhookPoster, type PreparedEvent } from './bench-load.js';
import { BenchUsageError } from './bench-options.js';
import { OPEN_LOOP_SOCKETS } from './bench-e2e.js';
import { whole } from './bench-pair.js';
import { int } from './bench-tables.js';
import { busyPercent, machineTicks, type MachineTicks } from './machine-cpu.js';

export interface Step {
  rate: number;
  seconds: number;
}

export const DEFAULT_STEPS = '3000x10,4500x10,3000x30';

/** `RATExSECONDS,…`: whole webhooks a second and whole seconds, both over 0. */
export function parseSteps(text: string): Step[] {
  const steps = text.split(',').map((part) => {
    const match = /^\s*(\d+)x(\d+)\s*$/.exec(part);
    const rate = Number(match?.[1]);
    const seconds = Number(match?.[2]);
    if (!match || rate <= 0 || seconds <= 0) throw new BenchUsageError(`--steps: "${part.trim()}" is not RATExSECONDS (e.g. 4500x10)`);
    return { rate, seconds };
  });
  if (steps.length === 0) throw new BenchUsageError('--steps: no steps');
  return steps;
}

/** The counters read each second. */
export interface Reading {
  atS: number;
  sent: number;
  acknowledged: number;
  actedOn: number;
  engineCpuS: number;
  machine?: MachineTicks;
  rssMb: number;
}

/** One printed line: what happened between two readings. */
export function secondLine(before: Reading, now: Reading): string {
  const span = now.atS - before.atS;
  const per = (a: number, b: number) => int((a - b) / span);
  const machine = busyPercent(before.machine, now.machine);
  return `${now.atS.toFixed(0).padStart(4)} s  sent ${per(now.sent, before.sent).padStart(6)}/s  acknowledged ${per(now.acknowledged, before.acknowledged).padStart(6)}/s` +
    `  acted on ${per(now.actedOn, before.actedOn).padStart(6)}/s  backlog ${int(now.acknowledged - now.actedOn).padStart(7)}` +
    `  engine ${int((100 * (now.engineCpuS - before.engineCpuS)) / span).padStart(4)} %  machine ${machine === undefined ? '–' : `${int(machine)} %`}` +
    `  RSS ${int(now.rssMb)} MB`;
}

export interface StepsOptions {
  steps: Step[];
  connections: number;
}

export function stepsOptions(argv: string[]): StepsOptions {
  const { values } = parseArgs({
    args: argv,
    options: { steps: { type: 'string', default: DEFAULT_STEPS }, connections: { type: 'string', default: String(OPEN_LOOP_SOCKETS) } },
  });
  return { steps: parseSteps(values.steps!), connections: whole(values.connections!, '--connections', 1) };
}

const say = (line: string): void => void process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Counts {
  sent: number;
  acknowledged: number;
}

/** Sends `events` at each step's rate in turn, counting in `counts` as it goes; resolves once every answer is in. */
async function sendSteps(poster: WebhookPoster, events: PreparedEvent[], steps: Step[], started: number, counts: Counts): Promise<void> {
  const answers: Promise<void>[] = [];
  let due = started;
  for (const step of steps) {
    for (let i = 0; i < step.rate * step.seconds; i++) {
      due += 1000 / step.rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      answers.push(poster.post(events[counts.sent++]).then((status) => void (status === 202 && counts.acknowledged++)));
    }
  }
  await Promise.all(answers);
}

/** Sends the steps to `engine`, a line a second, and waits (at most a minute) for everything acknowledged to be acted on. */
async function run(engine: BenchEngine, fake: FakeService, { steps, connections }: StepsOptions): Promise<void> {
  const total = steps.reduce((n, s) => n + s.rate * s.seconds, 0);
  const prefix = runPrefix('steps');
  const events = signedEvents('matching', prefix, total);
  const arrivals = await fake.beginRun(prefix, total);
  const poster = new WebhookPoster(engine.url, connections);
  say(`steps: ${steps.map((s) => `${int(s.rate)}/s for ${s.seconds} s`).join(', then ')}; ${connections} keep-alive connections; engine on SQLite`);
  const counts: Counts = { sent: 0, acknowledged: 0 };
  const started = performance.now();
  const read = (): Reading => ({
    atS: (performance.now() - started) / 1000, sent: counts.sent, acknowledged: counts.acknowledged, actedOn: arrivals.arrived(),
    engineCpuS: engine.cpuSeconds(), machine: machineTicks(), rssMb: engine.memory().rssMb,
  });
  let last = read();
  const tick = () => {
    const now = read();
    // The last line covers what is left of a second; a sliver of one would print its rates blown up.
    if (now.atS - last.atS < 0.2) return;
    say(secondLine(last, now));
    last = now;
  };
  const ticker = setInterval(tick, 1000);
  try {
    await sendSteps(poster, events, steps, started, counts);
    const deadline = performance.now() + 60_000;
    while (arrivals.arrived() < counts.acknowledged && performance.now() < deadline) await sleep(100);
  } finally {
    clearInterval(ticker);
    poster.close();
  }
  tick();
  const done = arrivals.arrived();
  say(`${int(counts.acknowledged)} of ${int(counts.sent)} acknowledged, ${int(done)} acted on, ${((performance.now() - started) / 1000).toFixed(1)} s after the first was due` +
    `${done < counts.acknowledged ? ` (${int(counts.acknowledged - done)} not acted on a minute after the last answer)` : ''}; ${arrivals.duplicates()} acted on twice`);
}

async function main(argv: string[]): Promise<void> {
  const options = stepsOptions(argv);
  const cleanup = new Cleanup();
  process.once('SIGINT', () => cleanup.interrupt());
  try {
    const fake = await startFakeService(cleanup);
    const db = createSqliteDatabase(cleanup);
    await run(await startEngine({ layout: 'child', databaseUrl: db.url, serviceUrl: fake.url }, cleanup), fake, options);
  } finally {
    await cleanup.runAll((line) => process.stderr.write(`${line}\n`));
  }
}

if (isEntryFile(import.meta.url)) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`bench:steps: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
