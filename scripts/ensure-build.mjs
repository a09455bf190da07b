// Builds dist/ when it is missing or older than any source file, the engine's
// bundle (dist/bundle/main.js: scripts/build-engine.mjs) when it is missing or
// older than dist/, and the console (dist-console/) when it is missing or
// older than console/, so
// `npm start` and the other commands work on a fresh clone and after an edit.
import { execSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const built = existsSync('dist/main.js') ? statSync('dist/main.js').mtimeMs : 0;
if (built < Math.max(newest('src'), statSync('tsconfig.json').mtimeMs)) {
  process.stderr.write('building dist/ …\n');
  execSync('npx nest build', { stdio: 'inherit' });
}
const { buildEngineBundle, engineBundleNeeded, ENGINE_ENTRY, ENGINE_BUNDLE } = await import('./build-engine.mjs');
if (engineBundleNeeded(ENGINE_ENTRY, ENGINE_BUNDLE)) {
  process.stderr.write('bundling dist/bundle/main.js …\n');
  await buildEngineBundle(ENGINE_ENTRY, ENGINE_BUNDLE);
}
const { buildConsole, consoleBuildNeeded } = await import('./build-console.mjs');
if (consoleBuildNeeded()) {
  process.stderr.write('building dist-console/ …\n');
  await buildConsole();
}
