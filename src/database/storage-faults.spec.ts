import { QueryFailedError } from 'typeorm';
import { fileFault, refusalMessage, storageFaultOf, unwritableDatabase, type StorageFaultKind } from './storage-faults.js';

/** An error as a driver throws it: a message and a code. */
function driverError(code: string | undefined, message = 'something failed'): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}

describe(storageFaultOf.name, () => {
  it.each<[string, Error, StorageFaultKind]>([
    ['SQLite out of space', driverError('SQLITE_FULL', 'database or disk is full'), 'disk_full'],
    ['a read-only SQLite file', driverError('SQLITE_READONLY', 'attempt to write a readonly database'), 'read_only'],
    ['an extended read-only code', driverError('SQLITE_READONLY_DBMOVED'), 'read_only'],
    ['a SQLite write error', driverError('SQLITE_IOERR_WRITE', 'disk I/O error'), 'io_error'],
    ['a SQLite file that cannot be opened', driverError('SQLITE_CANTOPEN', 'unable to open database file'), 'io_error'],
    ['a closed SQLite connection', new TypeError('The database connection is not open'), 'io_error'],
    ['a read-only PostgreSQL transaction', driverError('25006', 'cannot execute INSERT in a read-only transaction'), 'read_only'],
    ['PostgreSQL out of space', driverError('53100', 'could not extend file'), 'disk_full'],
    ['a terminated session', driverError('57P01', 'terminating connection due to administrator command'), 'unreachable'],
    ['a server starting up', driverError('57P03', 'the database system is starting up'), 'unreachable'],
    ['any connection exception', driverError('08006'), 'unreachable'],
    ['a refused connection', driverError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'), 'unreachable'],
    ['a lost connection, in words only', new Error('Connection terminated unexpectedly'), 'unreachable'],
    ['a pool that cannot connect', new Error('timeout exceeded when trying to connect'), 'unreachable'],
  ])('calls %s a storage fault (%s)', (_, error, kind) => {
    expect(storageFaultOf(error)?.kind).toBe(kind);
  });

  it.each<[string, unknown]>([
    ['a unique violation', driverError('SQLITE_CONSTRAINT_UNIQUE')],
    ['a foreign key checked at COMMIT', driverError('23503', 'violates foreign key constraint')],
    ['a syntax error', driverError('42601')],
    ['a busy database', driverError('SQLITE_BUSY')],
    ['an error of the engine', new Error('undefined is not a function')],
    ['a file-system error outside the database', driverError('EACCES')],
    ['something that is not an error', 'SQLITE_FULL'],
    ['nothing', undefined],
  ])('does not call %s one', (_, error) => {
    expect(storageFaultOf(error)).toBeUndefined();
  });

  it("looks through TypeORM's wrapper to the driver's error", () => {
    const wrapped = new QueryFailedError('COMMIT', [], driverError('SQLITE_FULL', 'database or disk is full'));
    expect(storageFaultOf(wrapped)).toEqual({ kind: 'disk_full', message: 'SQLITE_FULL: database or disk is full' });
  });
});

describe(refusalMessage.name, () => {
  it.each<StorageFaultKind>(['disk_full', 'read_only', 'io_error', 'unreachable'])('tells a sender what happened to its request (%s)', (kind) => {
    expect(refusalMessage(kind)).toMatch(/nothing was stored, send it again later$/);
  });
});

describe(unwritableDatabase.name, () => {
  it('names the database, the fault and what to check, for SQLite', () => {
    const error = unwritableDatabase('sqlite:/data/engine.sqlite', { kind: 'read_only', message: 'the file cannot be written (EPERM)' });
    expect(error.message).toBe(
      'the database sqlite:/data/engine.sqlite cannot be written (read_only: the file cannot be written (EPERM)); the engine needs a writable database: ' +
        'check the file and its folder (permissions, attributes such as chattr +i, a read-only mount, free space), then start again',
    );
  });

  it('points at the server for PostgreSQL', () => {
    const error = unwritableDatabase('postgres://db:5432/engine', { kind: 'read_only', message: '25006: cannot execute UPDATE in a read-only transaction' });
    expect(error.message).toMatch(/^the database postgres:\/\/db:5432\/engine cannot be written \(read_only: 25006: .*check the PostgreSQL server/);
  });
});

describe(fileFault.name, () => {
  it.each<[string, StorageFaultKind]>([
    ['EROFS', 'read_only'],
    ['EACCES', 'read_only'],
    ['EPERM', 'read_only'],
    ['ENOSPC', 'disk_full'],
    ['EIO', 'io_error'],
  ])('calls %s %s', (code, kind) => {
    expect(fileFault(Object.assign(new Error(`${code}: failed`), { code }), 'the file cannot be written')).toEqual({ kind, message: `the file cannot be written (${code}: failed)` });
  });
});
