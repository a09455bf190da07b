/**
 * `npm start` as a user runs it: the engine's node gets the young generation's bound for the database DATABASE_URL
 * names (src/config/heap-growth.ts engineNodeOptions, printed by scripts/node-options.mjs), on each database, and the
 * engine starts without the warning it logs when node has no such bound.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { engineNodeOptions } from '../src/config/heap-growth.js';
import { databasesUnderTest, type DatabaseKindUnderTest } from './support/databases.js';
import { engineEnv } from './support/engine.js';
import { freePort } from './support/ports.js';
import { waitUntil } from './support/wait.js';

/** The options of the node process running the engine's bundle with PORT=`port` (Linux: read from /proc). */
function engineNodeArgs(port: number): string[] | undefined {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let args: string[];
    let environ: string[];
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      // node itself, not the shell npm runs the script's line in (whose one argument ends with the same name)
      if (!/(^|\/)node$/.test(args[0]!) || !args.includes('dist/bundle/main.js')) continue;
      environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    if (environ.includes(`PORT=${port}`)) return args.slice(1, args.indexOf('dist/bundle/main.js'));
  }
  return undefined;
}

/** Stops `npm start` and everything it started (its process group). */
function stop(npm: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (npm.exitCode !== null || npm.signalCode !== null) return resolve();
    npm.once('exit', () => resolve());
    try {
      process.kill(-npm.pid!, 'SIGTERM');
    } catch {
      resolve(); // the group is gone already
    }
  });
}

describe('npm start', () => {
  let kinds: DatabaseKindUnderTest[] = [];
  beforeAll(async () => {
    // npm start builds what is out of date: here that would rewrite dist/ under the suites running beside this one.
    const { buildsNeeded } = (await import('../scripts/ensure-build.mjs' as string)) as { buildsNeeded(): string[] };
    const stale = buildsNeeded();
    if (stale.length > 0) throw new Error(`${stale.join(', ')} out of date: run \`npm run build\` first (npm test does)`);
    kinds = await databasesUnderTest('npm start');
  });

  it('starts the engine with the young generation bounded as its database wants, on each database', async () => {
    for (const kind of kinds) {
      const database = await kind.create();
      const port = await freePort();
      const env = { ...process.env, ...engineEnv({ DATABASE_URL: database.url }), PORT: String(port) } as NodeJS.ProcessEnv;
      const npm = spawn('npm', ['start'], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      const output: string[] = [];
      npm.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      npm.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      try {
        await waitUntil(() => output.join('').includes('"msg":"engine started"') || npm.exitCode !== null, {
          timeoutMs: 60_000,
          intervalMs: 100,
          what: `npm start on ${kind.name}`,
        });
        expect(output.join('')).toContain('"msg":"engine started"');
        expect(engineNodeArgs(port)).toEqual([...engineNodeOptions(database.url)]);
        expect(output.join('')).not.toContain('node was started without');
      } finally {
        await stop(npm);
        await database.drop();
      }
    }
  }, 150_000);
});
