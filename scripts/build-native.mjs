// Compiles native/wal-coalesce.c, the SQLite VFS that writes the write-ahead
// log a commit at a time (src/database/wal-coalesce.ts), into
// build/wal-coalesce.so: a run-time extension of the SQLite inside
// better-sqlite3, built against that SQLite's own headers with the C compiler
// that built better-sqlite3 (`$CC`, else `cc`). Nothing is downloaded.
//
// `node scripts/build-native.mjs` builds it when it is missing or older than
// its source; npm runs it after every install (package.json `postinstall`),
// `npm start` and `npm test` before they start. `--optional` (the install):
// a failed build warns and exits 0, and the engine then writes its log frame
// by frame, saying so as it starts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const NATIVE_SOURCE = join(ROOT, 'native/wal-coalesce.c');
export const NATIVE_TARGET = join(ROOT, 'build/wal-coalesce.so');

/** The folder of better-sqlite3's SQLite sources (sqlite3.h, sqlite3ext.h). */
function sqliteHeaders() {
  const packageJson = createRequire(import.meta.url).resolve('better-sqlite3/package.json');
  return join(dirname(packageJson), 'deps/sqlite3');
}

export function nativeBuildNeeded() {
  return !existsSync(NATIVE_TARGET) || statSync(NATIVE_TARGET).mtimeMs < statSync(NATIVE_SOURCE).mtimeMs;
}

export function buildNative() {
  mkdirSync(dirname(NATIVE_TARGET), { recursive: true });
  const compiler = process.env.CC || 'cc';
  const flags = ['-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers'];
  execFileSync(compiler, [...flags, '-shared', '-fPIC', '-I', sqliteHeaders(), NATIVE_SOURCE, '-o', NATIVE_TARGET], { stdio: 'inherit' });
}

/**
 * Builds it when needed; a failed build is said on stderr (the engine then writes its log frame by frame). Whether
 * the extension is there and up to date.
 */
export function ensureNative() {
  if (!nativeBuildNeeded()) return true;
  process.stderr.write('building build/wal-coalesce.so …\n');
  try {
    buildNative();
    return true;
  } catch (error) {
    process.stderr.write(`could not build build/wal-coalesce.so (${error.message}); SQLite will write its log frame by frame\n`);
    return false;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (!ensureNative() && !process.argv.includes('--optional')) process.exit(1);
}
