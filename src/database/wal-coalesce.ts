/**
 * SQLite's write-ahead log written a commit at a time: native/wal-coalesce.c, an SQLite VFS over the default one
 * that hands each commit's log frames to the file in one write instead of two a frame (README, How it works). It is
 * a run-time extension that `npm install` compiles (scripts/build-native.mjs), loaded here once per process before
 * the engine opens a SQLite file, and registered as the default VFS of better-sqlite3's SQLite from then on.
 *
 * Without it (not built: no C compiler when the engine was installed) the engine runs as before, frame by frame,
 * and says so as it starts (main.ts).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Where `npm install` builds the extension. */
export const WAL_COALESCE_PATH = fileURLToPath(new URL('../../build/wal-coalesce.so', import.meta.url));
const ENTRY_POINT = 'sqlite3_walcoalesce_init';

/** Whether the log is written a commit at a time, and if not, why. */
export type WalCoalesce = { inUse: true } | { inUse: false; reason: string };

interface Connection {
  loadExtension(file: string, entryPoint?: string): void;
  prepare(sql: string): { get(...params: unknown[]): unknown };
  close(): void;
}

type Sqlite = new (file: string) => Connection;

let state: WalCoalesce | undefined;

function sqlite(): Sqlite {
  return createRequire(import.meta.url)('better-sqlite3') as Sqlite;
}

/**
 * Registers the VFS for this process, once (the extension stays loaded for the life of the process); what came of
 * it. A file that fails to load leaves SQLite's own VFS in place.
 */
export function loadWalCoalesce(): WalCoalesce {
  return (state ??= loadExtensionFrom(WAL_COALESCE_PATH));
}

/** Loads the extension at `path` on a connection of its own, which registers the VFS; what came of it. */
export function loadExtensionFrom(path: string): WalCoalesce {
  if (!existsSync(path)) return { inUse: false, reason: `${path} is not built (npm install builds it)` };
  const boot = new (sqlite())(':memory:');
  try {
    boot.loadExtension(path, ENTRY_POINT);
    return { inUse: true };
  } catch (error) {
    return { inUse: false, reason: `${path} did not load: ${(error as Error).message}` };
  } finally {
    boot.close();
  }
}

/** What `loadWalCoalesce` came to; undefined before the engine opened a SQLite file. */
export function walCoalesceState(): WalCoalesce | undefined {
  return state;
}

/**
 * The log writes SQLite asked for in this process and those the VFS made (tests and measurements: the counts are
 * the extension's, kept without locks).
 */
export function walWriteCounts(): { asked: number; made: number } {
  const probe = new (sqlite())(':memory:');
  try {
    probe.loadExtension(WAL_COALESCE_PATH, ENTRY_POINT);
    const row = probe.prepare('SELECT wal_coalesce_writes(0) AS asked, wal_coalesce_writes(1) AS made').get() as { asked: number; made: number };
    return { asked: Number(row.asked), made: Number(row.made) };
  } finally {
    probe.close();
  }
}
