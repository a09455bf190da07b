// Builds the engine's SQLite extension (build/wal-coalesce.so:
// scripts/build-native.mjs) when it is missing or older than its source,
// dist/ when it is missing or older than any source file, the engine's
// bundle (dist/bundle/main.js: scripts/build-engine.mjs) when it is missing or
// older than dist/, and the console (dist-console/) when it is missing or
// older than console/, so
// `npm start` and the other commands work on a fresh clone and after an edit.
// `buildsNeeded` says what it would build, for a test that must not rebuild
// dist/ under the suites running beside it (test/npm-start.e2e-spec.ts).
import { execSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildEngineBundle, buildRuleValidators, engineBundleNeeded, ENGINE_ENTRY, ENGINE_BUNDLE } from './build-engine.mjs';
import { buildConsole, consoleBuildNeeded } from './build-console.mjs';
import { ensureNative } from './build-native.mjs';

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

function distBuildNeeded() {
  const built = existsSync('dist/main.js') ? statSync('dist/main.js').mtimeMs : 0;
  return built < Math.max(newest('src'), statSync('tsconfig.json').mtimeMs);
}

/** What a run would build, in order: `dist/`, `dist/bundle/main.js`, `dist-console/` (none: all up to date). */
export function buildsNeeded() {
  const needed = [];
  if (distBuildNeeded()) needed.push('dist/', 'dist/bundle/main.js');
  else if (engineBundleNeeded(ENGINE_ENTRY, ENGINE_BUNDLE)) needed.push('dist/bundle/main.js');
  if (consoleBuildNeeded()) needed.push('dist-console/');
  return needed;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  ensureNative();
  if (distBuildNeeded()) {
    process.stderr.write('building dist/ …\n');
    execSync('npx nest build', { stdio: 'inherit' });
  }
  if (engineBundleNeeded(ENGINE_ENTRY, ENGINE_BUNDLE)) {
    process.stderr.write('bundling dist/bundle/main.js …\n');
    await buildEngineBundle(ENGINE_ENTRY, ENGINE_BUNDLE);
    await buildRuleValidators(ENGINE_ENTRY);
  }
  if (consoleBuildNeeded()) {
    process.stderr.write('building dist-console/ …\n');
    await buildConsole();
  }
}
