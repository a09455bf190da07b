/**
 * The SQLite driver is built from source at install, whatever npm passes on to install scripts: better-sqlite3's
 * install script (`prebuild-install || node-gyp rebuild`) reads `.prebuild-installrc` from the folders above it, so
 * it never fetches a prebuilt binary even where npm no longer hands `build-from-source` from `.npmrc` to scripts
 * (npm 11 warns that it will stop). Run here as npm runs it, from the package's folder, with no npm settings in the
 * environment; it only says what it would do (an unreachable proxy stops any download it might try).
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const driver = dirname(require.resolve('better-sqlite3/package.json'));
const prebuildInstall = join(dirname(require.resolve('prebuild-install/package.json')), 'bin.js');

function installScriptSays(): string {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, https_proxy: 'http://127.0.0.1:9', http_proxy: 'http://127.0.0.1:9' };
  const ran = spawnSync(process.execPath, [prebuildInstall, '--verbose'], { cwd: driver, env, encoding: 'utf8', timeout: 30_000 });
  return `${ran.stdout}${ran.stderr}`;
}

describe('installing the SQLite driver', () => {
  it('builds it from source without asking npm: prebuild-install is told so by .prebuild-installrc and downloads nothing', () => {
    const said = installScriptSays();
    expect(said).toContain('--build-from-source specified, not attempting download');
    expect(said).not.toMatch(/http request GET/);
  });
});
