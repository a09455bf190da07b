// Builds dist-bench/ (bench/tsconfig.json) when it is missing or older than any
// source it is made from, so `npm run bench` works on a fresh clone and after
// an edit, without touching dist/ (which `npm run build` owns).
import { execSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

const OUT = 'dist-bench';
const SOURCES = ['bench', 'src', 'test/support', 'tsconfig.json'];
/** The figures and the documentation bench/ holds are not sources. */
const NOT_SOURCES = [join('bench', 'results'), join('bench', 'README.md')];
/** Read by the engine beside its compiled files (src/rules/rule-schema.ts looks in `../../rules/`). */
const ASSETS = ['rules/rule.schema.json'];

function newest(path) {
  if (NOT_SOURCES.includes(path) || !existsSync(path)) return 0;
  if (!statSync(path).isDirectory()) return statSync(path).mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

/**
 * Two builds at once (two test files that run the benchmark, or a benchmark started beside them) take turns: the
 * second waits for the first, then finds its output current. The lock is a folder (mkdir either makes it or fails);
 * one left by a build that was killed is taken over after LOCK_STALE_MS.
 */
const LOCK = `${OUT}.lock`;
const LOCK_STALE_MS = 600_000;

function lockAge() {
  try {
    return Date.now() - statSync(LOCK).mtimeMs;
  } catch {
    return 0; // let go meanwhile: try again
  }
}

async function takeLock() {
  for (;;) {
    try {
      mkdirSync(LOCK);
      return;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      if (lockAge() > LOCK_STALE_MS) rmSync(LOCK, { recursive: true, force: true });
      else await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

function fail(message) {
  rmSync(LOCK, { recursive: true, force: true });
  process.stderr.write(message);
  process.exit(1);
}

await takeLock();
try {
  const entry = join(OUT, 'bench', 'bench.js');
  const built = existsSync(entry) ? statSync(entry).mtimeMs : 0;
  if (built < Math.max(...SOURCES.map(newest))) {
    process.stderr.write(`building ${OUT}/ …\n`);
    rmSync(OUT, { recursive: true, force: true });
    try {
      execSync('npx tsc -p bench/tsconfig.json', { stdio: 'inherit' });
    } catch {
      // tsc writes its output even when the types are wrong; a later run must not take that for a build.
      rmSync(OUT, { recursive: true, force: true });
      fail(`${OUT}/ was not built: fix the errors above\n`);
    }
  }
  // The engine as `npm start` runs it: one bundle (scripts/build-engine.mjs), built from dist-bench/src/.
  const { buildEngineBundle, buildRuleValidators, engineBundleNeeded } = await import('../scripts/build-engine.mjs');
  const [engineEntry, engineBundle] = [join(OUT, 'src', 'main.js'), join(OUT, 'bundle', 'main.js')];
  if (engineBundleNeeded(engineEntry, engineBundle)) {
    await buildEngineBundle(engineEntry, engineBundle);
    // Where this bundle looks for them too (two folders up, then dist/), as npm start's does.
    await buildRuleValidators(engineEntry);
  }
  // Copied every time: cheap, and never stale. (The SQLite extension only when npm install built it: src/database/wal-coalesce.ts.)
  for (const asset of [...ASSETS, ...['build/wal-coalesce.so'].filter((file) => existsSync(file))]) {
    mkdirSync(join(OUT, dirname(asset)), { recursive: true });
    copyFileSync(asset, join(OUT, asset));
  }
} finally {
  rmSync(LOCK, { recursive: true, force: true });
}
