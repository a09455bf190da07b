// `npm test`: type-check, lint (`npm run lint`: eslint.config.js), build (the
// child-process suites run dist/bundle/main.js, what `npm start` runs; the
// console's browser suite loads dist-console/), then every jest suite (unit
// specs beside the code, end-to-end suites in test/, the console in Chromium
// when it is installed), and a closing line that counts them.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  return result.status ?? 1;
}

if (run('npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']) !== 0) {
  console.error('type check failed');
  process.exit(1);
}
if (run('npm', ['run', 'lint']) !== 0) {
  console.error('lint failed: an import against the direction of the folders, an import cycle, a size limit or a typescript-eslint rule (see above)');
  process.exit(1);
}
if (run(process.execPath, ['scripts/build-native.mjs']) !== 0 || run('npx', ['nest', 'build']) !== 0 || run(process.execPath, ['scripts/build-engine.mjs']) !== 0) {
  console.error('build failed');
  process.exit(1);
}
// The console's front end: type-checked, then built into dist-console/, which
// the engine serves and the browser suite (test/console-browser.e2e-spec.ts) loads.
if (run('npx', ['tsc', '-p', 'console/tsconfig.json']) !== 0 || run(process.execPath, ['scripts/build-console.mjs']) !== 0) {
  console.error('the console (console/) failed to type-check or build');
  process.exit(1);
}

const report = join(tmpdir(), `jest-report-${process.pid}.json`);
const status = run(
  process.execPath,
  ['--experimental-vm-modules', '--no-warnings=ExperimentalWarning', 'node_modules/jest/bin/jest.js', '--json', `--outputFile=${report}`, ...process.argv.slice(2)],
);
try {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  const skipped = r.numPendingTests + r.numTodoTests;
  console.log(`\ntests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
  rmSync(report, { force: true });
} catch {
  console.log('\ntests: no report from jest');
}
process.exit(status);
