/*
 * wal-coalesce: an SQLite VFS that writes a transaction's write-ahead-log frames in one write(2) instead of two
 * per frame.
 *
 * SQLite appends each frame of its log (WAL mode) with two writes: the frame's 24-byte header, then the page
 * (walWriteOneFrame in sqlite3.c). A commit of the engine's that changes a hundred pages makes two hundred system
 * calls, about 3 us each on this project's machines against under 1 us a frame for the same bytes in one write.
 * This shim keeps the log's writes that follow one another in a buffer and hands them to the real file in one
 * write at the latest when the commit's last frame is written, before SQLite publishes the commit in the log's
 * index, so no reader (in this process or another) can look for a frame that is not in the file yet, and a failed
 * write fails the commit as it would have without the buffer.
 *
 * Everything else is the default VFS's, untouched: the database file, its shared memory, locks and syncs; the
 * log's reads, syncs, truncations and size are answered only after the buffer has been written.
 *
 * A frame's header says whether it ends a commit: its second 32-bit word is the database's size in pages after the
 * commit, and zero in every other frame (https://sqlite.org/fileformat2.html#walformat). The page written after
 * such a header is the commit's last write but padding (which only FULL syncs on a device without powersafe
 * overwrite add, each padding frame again a commit frame, and a sync follows), so the buffer is written then;
 * anything that does not continue the buffer (a write elsewhere in the file: a new log's header, a frame rewritten
 * in place, a rolled-back transaction's frames overwritten) writes it first.
 *
 * Loaded as a run-time extension (better-sqlite3's loadExtension) it registers itself as the default VFS, under
 * the name "wal-coalesce", and stays loaded for the life of the process (SQLITE_OK_LOAD_PERMANENTLY).
 */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <string.h>

#define BUFFER_LIMIT (4 * 1024 * 1024)
#define WRITE_LIMIT (31 * 4096)
#define BUFFER_KEPT (1024 * 1024)

typedef struct CoalesceFile CoalesceFile;
struct CoalesceFile {
  sqlite3_file base;
  sqlite3_file *real;  /* the default VFS's file, allocated right after this struct */
  int wal;             /* a write-ahead log: its appended frames are buffered */
  CoalesceFile *twin;  /* a log's database file, a database file's log (while both are open) */
  int flushAfterNext;  /* the last write was a commit frame's header: write the buffer with its page */
  unsigned char *buffer;
  int used;
  int size;
  sqlite3_int64 start; /* the file offset of buffer[0] */
  sqlite3_int64 end;   /* where the next frame goes: the end of the furthest write since the log began (-1: none yet) */
};

static sqlite3_vfs *realVfs;
/* The log's writes SQLite asked for and those made (for tests and measurements; not exact across threads). */
static sqlite3_int64 walWrites;
static sqlite3_int64 walFlushes;

/*
 * The buffer, written in pieces of at most WRITE_LIMIT bytes: the default VFS writes at most 128 KiB less one byte
 * a call (it masks the length with 0x1ffff: seekAndWriteFd in sqlite3.c), and SQLite never asks it for more.
 */
static int flush(CoalesceFile *f) {
  int rc = SQLITE_OK;
  for (int done = 0; done < f->used && rc == SQLITE_OK; done += WRITE_LIMIT) {
    int amount = f->used - done < WRITE_LIMIT ? f->used - done : WRITE_LIMIT;
    rc = f->real->pMethods->xWrite(f->real, f->buffer + done, amount, f->start + done);
    walFlushes++;
  }
  f->used = 0;
  /* A transaction far larger than the engine's commits (a migration, a prune) does not keep its buffer's memory. */
  if (f->size > BUFFER_KEPT) {
    sqlite3_free(f->buffer);
    f->buffer = 0;
    f->size = 0;
  }
  return rc;
}

static int cClose(sqlite3_file *file) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  if (f->twin != 0) f->twin->twin = 0;
  int closed = f->real->pMethods->xClose(f->real);
  sqlite3_free(f->buffer);
  f->buffer = 0;
  return rc != SQLITE_OK ? rc : closed;
}

static int cRead(sqlite3_file *file, void *out, int amount, sqlite3_int64 offset) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, amount, offset);
}

static int append(CoalesceFile *f, const void *data, int amount) {
  if (f->used + amount > f->size) {
    int size = f->size == 0 ? 256 * 1024 : f->size;
    while (size < f->used + amount) size *= 2;
    unsigned char *grown = sqlite3_realloc(f->buffer, size);
    if (grown == 0) return SQLITE_NOMEM;
    f->buffer = grown;
    f->size = size;
  }
  memcpy(f->buffer + f->used, data, amount);
  f->used += amount;
  return SQLITE_OK;
}

static int isCommitHeader(const void *data, int amount) {
  const unsigned char *h = data;
  return amount == 24 && (h[4] | h[5] | h[6] | h[7]) != 0;
}

/*
 * A write to the log. Frames appended where the last one ended (and a new log's header, at its start) go to the
 * buffer, which is written when a commit frame's page joins it; any other write (a frame rewritten in place, a
 * header whose checksum SQLite rewrites after the commit frame, frames written over a rolled-back transaction's)
 * writes the buffer, then itself, straight away, so that nothing SQLite wrote after its commit frame waits here.
 */
static int walWrite(CoalesceFile *f, const void *data, int amount, sqlite3_int64 offset) {
  int rc;
  int pageOfCommit = f->flushAfterNext;
  f->flushAfterNext = isCommitHeader(data, amount);
  int newLog = offset == 0 && amount == 32;
  int appended = newLog || f->end < 0 || offset == f->end;
  /* What the buffer holds ends at f->end, so an append continues it; a new log starts a buffer of its own. */
  if (!appended || newLog || f->used + amount > BUFFER_LIMIT) {
    if ((rc = flush(f)) != SQLITE_OK) return rc;
  }
  if (newLog) f->end = 0;
  if (offset + amount > f->end) f->end = offset + amount;
  walWrites++;
  if (appended) {
    if (f->used == 0) f->start = offset;
    if (append(f, data, amount) == SQLITE_OK) return pageOfCommit ? flush(f) : SQLITE_OK;
    /* No memory for a bigger buffer: what it holds, then this, as SQLite would have written them. */
    if ((rc = flush(f)) != SQLITE_OK) return rc;
  }
  walFlushes++;
  return f->real->pMethods->xWrite(f->real, data, amount, offset);
}

static int cWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->wal ? walWrite(f, data, amount, offset) : f->real->pMethods->xWrite(f->real, data, amount, offset);
}

static int cTruncate(sqlite3_file *file, sqlite3_int64 size) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  if (f->end > size) f->end = size;
  return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int cSync(sqlite3_file *file, int flags) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int cFileSize(sqlite3_file *file, sqlite3_int64 *size) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int cLock(sqlite3_file *file, int level) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xLock(f->real, level);
}

static int cUnlock(sqlite3_file *file, int level) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xUnlock(f->real, level);
}

static int cCheckReservedLock(sqlite3_file *file, int *out) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int cFileControl(sqlite3_file *file, int op, void *arg) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  if (rc != SQLITE_OK) return rc;
  rc = f->real->pMethods->xFileControl(f->real, op, arg);
  if (op == SQLITE_FCNTL_VFSNAME && rc == SQLITE_OK) {
    *(char **)arg = sqlite3_mprintf("wal-coalesce/%z", *(char **)arg);
  }
  return rc;
}

static int cSectorSize(sqlite3_file *file) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xSectorSize(f->real);
}

static int cDeviceCharacteristics(sqlite3_file *file) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xDeviceCharacteristics(f->real);
}

static int cShmMap(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xShmMap(f->real, page, size, extend, out);
}

/*
 * The database's shared-memory locks. As a write transaction ends, its connection lets go of the log's write lock
 * (WAL_WRITE_LOCK, lock 0 in sqlite3.c): a commit has written its buffer with its last frame already, and a
 * transaction rolled back leaves frames nobody will read, which are written here rather than later, when another
 * connection may have written its own frames in their place.
 */
static int cShmLock(sqlite3_file *file, int offset, int n, int flags) {
  CoalesceFile *f = (CoalesceFile *)file;
  if ((flags & SQLITE_SHM_UNLOCK) && offset == 0 && f->twin != 0) flush(f->twin);
  return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void cShmBarrier(sqlite3_file *file) {
  CoalesceFile *f = (CoalesceFile *)file;
  f->real->pMethods->xShmBarrier(f->real);
}

static int cShmUnmap(sqlite3_file *file, int deleteFlag) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xShmUnmap(f->real, deleteFlag);
}

static int cFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
  CoalesceFile *f = (CoalesceFile *)file;
  int rc = flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, offset, amount, out);
}

static int cUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
  CoalesceFile *f = (CoalesceFile *)file;
  return f->real->pMethods->xUnfetch(f->real, offset, page);
}

static const sqlite3_io_methods coalesceMethods = {
  3, cClose, cRead, cWrite, cTruncate, cSync, cFileSize, cLock, cUnlock, cCheckReservedLock, cFileControl,
  cSectorSize, cDeviceCharacteristics, cShmMap, cShmLock, cShmBarrier, cShmUnmap, cFetch, cUnfetch,
};

static int cOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  CoalesceFile *f = (CoalesceFile *)file;
  memset(f, 0, sizeof(*f));
  f->real = (sqlite3_file *)&f[1];
  int rc = realVfs->xOpen(realVfs, name, f->real, flags, outFlags);
  if (rc != SQLITE_OK || f->real->pMethods == 0) {
    if (f->real->pMethods != 0) f->real->pMethods->xClose(f->real);
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  /* The unix VFS's files have version 3 methods, whose calls the wrapper passes on (init registers it only over that VFS). */
  if (f->real->pMethods->iVersion < 3) {
    f->real->pMethods->xClose(f->real);
    return SQLITE_CANTOPEN;
  }
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->end = -1;
  f->base.pMethods = &coalesceMethods;
  if (f->wal) {
    /* The log's database file, opened through this VFS before it: it flushes the log as its write lock is let go. */
    CoalesceFile *database = (CoalesceFile *)sqlite3_database_file_object(name);
    if (database != 0 && database->base.pMethods == &coalesceMethods) {
      f->twin = database;
      database->twin = f;
    }
  }
  return rc;
}

static int cDelete(sqlite3_vfs *vfs, const char *name, int syncDir) { return realVfs->xDelete(realVfs, name, syncDir); }
static int cAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) { return realVfs->xAccess(realVfs, name, flags, out); }
static int cFullPathname(sqlite3_vfs *vfs, const char *name, int n, char *out) { return realVfs->xFullPathname(realVfs, name, n, out); }
static void *cDlOpen(sqlite3_vfs *vfs, const char *name) { return realVfs->xDlOpen(realVfs, name); }
static void cDlError(sqlite3_vfs *vfs, int n, char *out) { realVfs->xDlError(realVfs, n, out); }
static void (*cDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) { return realVfs->xDlSym(realVfs, handle, symbol); }
static void cDlClose(sqlite3_vfs *vfs, void *handle) { realVfs->xDlClose(realVfs, handle); }
static int cRandomness(sqlite3_vfs *vfs, int n, char *out) { return realVfs->xRandomness(realVfs, n, out); }
static int cSleep(sqlite3_vfs *vfs, int us) { return realVfs->xSleep(realVfs, us); }
static int cCurrentTime(sqlite3_vfs *vfs, double *out) { return realVfs->xCurrentTime(realVfs, out); }
static int cGetLastError(sqlite3_vfs *vfs, int n, char *out) { return realVfs->xGetLastError(realVfs, n, out); }
static int cCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) { return realVfs->xCurrentTimeInt64(realVfs, out); }

static sqlite3_vfs coalesceVfs = {
  2, 0, 0, 0, "wal-coalesce", 0,
  cOpen, cDelete, cAccess, cFullPathname, cDlOpen, cDlError, cDlSym, cDlClose, cRandomness, cSleep, cCurrentTime,
  cGetLastError, cCurrentTimeInt64,
};

/* wal_coalesce_writes(0): the log's writes SQLite asked for in this process; (1): those made. */
static void writesFunction(sqlite3_context *context, int n, sqlite3_value **values) {
  sqlite3_result_int64(context, sqlite3_value_int(values[0]) == 0 ? walWrites : walFlushes);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_walcoalesce_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  SQLITE_EXTENSION_INIT2(api);
  if (realVfs == 0) {
    sqlite3_vfs *current = sqlite3_vfs_find(0);
    if (current == 0) return SQLITE_ERROR;
    /* Only over the unix VFS, whose files this shim knows (version 3 methods, writes of under 128 KiB). */
    if (strncmp(current->zName, "unix", 4) != 0) return SQLITE_ERROR;
    if (current != &coalesceVfs) {
      realVfs = current;
      coalesceVfs.szOsFile = (int)sizeof(CoalesceFile) + realVfs->szOsFile;
      coalesceVfs.mxPathname = realVfs->mxPathname;
      int rc = sqlite3_vfs_register(&coalesceVfs, 1);
      if (rc != SQLITE_OK) return rc;
    }
  }
  int rc = sqlite3_create_function(db, "wal_coalesce_writes", 1, SQLITE_UTF8, 0, writesFunction, 0, 0);
  return rc == SQLITE_OK ? SQLITE_OK_LOAD_PERMANENTLY : rc;
}
