// Builds the console (console/ → dist-console/): its TypeScript and Preact
// bundled by esbuild into one ES module, next to its page, stylesheet and icon.
// The engine serves dist-console/ at /console; `npm start` and `npm test` run
// this when console/ is newer than the build (see consoleBuildNeeded).
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE = join(ROOT, 'console');
const OUT = join(ROOT, 'dist-console');
const STATIC = ['index.html', 'console.css', 'favicon.svg'];

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** True when dist-console/ is missing or older than a file of console/. */
export function consoleBuildNeeded() {
  const built = join(OUT, 'app.js');
  return !existsSync(built) || statSync(built).mtimeMs < newest(SOURCE);
}

export async function buildConsole() {
  const { build } = await import('esbuild');
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  await build({
    entryPoints: [join(SOURCE, 'src', 'main.tsx')],
    outfile: join(OUT, 'app.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
  });
  for (const file of STATIC) copyFileSync(join(SOURCE, file), join(OUT, file));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--if-needed') && !consoleBuildNeeded()) process.exit(0);
  process.stderr.write('building dist-console/ …\n');
  await buildConsole();
}
