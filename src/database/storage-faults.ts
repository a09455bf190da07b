/**
 * Which driver errors mean "the database cannot take a write now", as opposed
 * to a bug or a bad statement. Only these become 503 `storage_unavailable`
 * (with Retry-After) and pause the workers; anything else stays an error of
 * the engine. SQLite reports result codes (better-sqlite3's `code`), PostgreSQL
 * SQLSTATEs, and node-postgres the socket's errno or a message of its own when
 * the connection is lost.
 */
import type { StorageFaultKind } from '../errors.js';

export type { StorageFaultKind };

export interface StorageFault {
  kind: StorageFaultKind;
  /** The driver's own words, for the log (never for answers: they may name paths and hosts). */
  message: string;
}

/** SQLite result codes (the extended ones start with these). */
const SQLITE_CODES: Array<[prefix: string, kind: StorageFaultKind]> = [
  ['SQLITE_FULL', 'disk_full'],
  ['SQLITE_READONLY', 'read_only'],
  ['SQLITE_IOERR', 'io_error'],
  ['SQLITE_CANTOPEN', 'io_error'],
];

/** PostgreSQL SQLSTATEs; a class (two characters) stands for every code in it. */
const POSTGRES_STATES: Record<string, StorageFaultKind> = {
  '25006': 'read_only', // read_only_sql_transaction: the server or database refuses writes
  '53100': 'disk_full',
  '58030': 'io_error',
  '08': 'unreachable', // connection exceptions
  '57P01': 'unreachable', // admin_shutdown: the server is stopping, or our session was terminated
  '57P02': 'unreachable', // crash_shutdown
  '57P03': 'unreachable', // cannot_connect_now: starting up or in recovery
  '53300': 'unreachable', // too_many_connections
};

const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** node-postgres and pg-pool say these in words, without a code. */
const LOST_CONNECTION = /connection terminated|not queryable|timeout exceeded when trying to connect|terminating connection/i;
/** better-sqlite3, when its connection was closed (a reopen that has not succeeded yet). */
const CLOSED_SQLITE = /database connection is not open/i;

function codeOf(error: Record<string, unknown>): string | undefined {
  return typeof error.code === 'string' ? error.code : undefined;
}

function kindOfCode(code: string): StorageFaultKind | undefined {
  if (code.startsWith('SQLITE_')) return SQLITE_CODES.find(([prefix]) => code.startsWith(prefix))?.[1];
  if (SOCKET_ERRORS.has(code)) return 'unreachable';
  if (/^[0-9A-Z]{5}$/.test(code)) return POSTGRES_STATES[code] ?? POSTGRES_STATES[code.slice(0, 2)];
  return undefined;
}

/** The storage fault behind `error`, or undefined when it is some other failure. TypeORM wraps driver errors: both are looked at. */
export function storageFaultOf(error: unknown): StorageFault | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const outer = error as Record<string, unknown>;
  const inner = outer.driverError !== null && typeof outer.driverError === 'object' ? (outer.driverError as Record<string, unknown>) : outer;
  const message = String(inner.message ?? outer.message ?? '');
  const code = codeOf(inner) ?? codeOf(outer);
  const kind = (code === undefined ? undefined : kindOfCode(code)) ??
    (LOST_CONNECTION.test(message) ? 'unreachable' : CLOSED_SQLITE.test(message) ? 'io_error' : undefined);
  return kind === undefined ? undefined : { kind, message: code !== undefined && !message.includes(code) ? `${code}: ${message}` : message };
}

/** What a refused sender is told: no paths, hosts or driver details. */
export function refusalMessage(kind: StorageFaultKind): string {
  const what: Record<StorageFaultKind, string> = {
    disk_full: "the engine's database is out of disk space",
    read_only: "the engine's database is read-only",
    io_error: "the engine's database cannot be written (I/O error)",
    unreachable: "the engine's database cannot be reached",
  };
  return `${what[kind]}; nothing was stored, send it again later`;
}

/** Why the engine will not start on a database: which one, what failed, and what to check. */
export function unwritableDatabase(location: string, fault: StorageFault): Error {
  const check = location.startsWith('sqlite:')
    ? 'the file and its folder (permissions, attributes such as chattr +i, a read-only mount, free space)'
    : 'the PostgreSQL server (running, reachable, not in recovery, default_transaction_read_only off, free space)';
  return new Error(`the database ${location} cannot be written (${fault.kind}: ${fault.message}); the engine needs a writable database: check ${check}, then start again`);
}

/** A file-system error (errno code) as a storage fault. */
export function fileFault(error: NodeJS.ErrnoException, what: string): StorageFault {
  const kind: StorageFaultKind = ['EROFS', 'EACCES', 'EPERM'].includes(error.code ?? '') ? 'read_only' : error.code === 'ENOSPC' ? 'disk_full' : 'io_error';
  return { kind, message: `${what} (${error.message})` };
}
