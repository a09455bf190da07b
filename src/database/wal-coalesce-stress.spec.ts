/**
 * native/wal-coalesce.c under AddressSanitizer and UndefinedBehaviorSanitizer: native/wal-coalesce-stress.c, built
 * here with better-sqlite3's own sqlite3.c and the VFS into build/wal-coalesce-stress (again only when a source is
 * newer), runs thousands of random transactions through the VFS on two connections and checks every one against a
 * model (what it does: that file's header). A memory error in the VFS aborts it, where a test through better-sqlite3
 * would pass and a database be corrupted some day.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const ROOT = process.cwd();
const SQLITE = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')), 'deps/sqlite3');
const SOURCES = [join(ROOT, 'native/wal-coalesce-stress.c'), join(ROOT, 'native/wal-coalesce.c'), join(SQLITE, 'sqlite3.c')];
const BINARY = join(ROOT, 'build/wal-coalesce-stress');
/** As better-sqlite3 builds its SQLite (deps/defines.gypi), for what the VFS sees: threading and the log's sync level. */
const DEFINES = ['-DSQLITE_CORE', '-DSQLITE_THREADSAFE=2', '-DSQLITE_DEFAULT_WAL_SYNCHRONOUS=1', '-DSQLITE_DEFAULT_CACHE_SIZE=-16000'];
const SANITIZERS = ['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer'];

function built(): string {
  const newest = Math.max(...SOURCES.map((file) => statSync(file).mtimeMs));
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs >= newest) return BINARY;
  mkdirSync(dirname(BINARY), { recursive: true });
  // -O1: sqlite3.c takes about 50 s to compile with the sanitizers on this project's machines (-O2 twice that).
  execFileSync(process.env.CC || 'cc', ['-O1', '-g', ...SANITIZERS, ...DEFINES, '-I', SQLITE, ...SOURCES, '-o', BINARY, '-lpthread', '-ldl', '-lm'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return BINARY;
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'wal-coalesce-stress-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the write-ahead log written a commit at a time, under the sanitizers', () => {
  it.each([1, 2, 3])('keeps every commit and nothing else through random transactions (seed %i)', (seed) => {
    const result = spawnSync(built(), [join(dir, `stress-${seed}.sqlite`), '1500', String(seed)], {
      encoding: 'utf8',
      env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', UBSAN_OPTIONS: 'print_stacktrace=1' },
    });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(result.stdout).toMatch(/^ok: 1500 transactions, the log's writes \d+ asked, \d+ made\n$/);
  }, 240_000);
});
