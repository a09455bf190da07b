/*
 * A stress test of wal-coalesce.c, built with SQLite itself (better-sqlite3's sqlite3.c) under AddressSanitizer and
 * UndefinedBehaviorSanitizer by src/database/wal-coalesce-stress.spec.ts: the VFS is C that the engine's durability
 * rests on, and a buffer written past its end, freed twice or read after its free would not fail a test made through
 * better-sqlite3, only corrupt a database some day.
 *
 *   wal-coalesce-stress FILE TRANSACTIONS SEED
 *
 * Two connections of one process take turns writing random transactions to one database in WAL mode through the
 * VFS: rows of a few bytes to 60 KiB (overflow pages), deletes, transactions of a few kilobytes to some 18 MiB (past
 * the VFS's 4 MiB buffer, and past the page cache, so that SQLite spills frames to the log before the commit), a
 * fifth of them rolled back, at synchronous FULL or NORMAL, with checkpoints of every kind now and then. After each
 * transaction both connections must see exactly what a model kept in memory says (the rows and a checksum of their
 * contents); at the end the database must pass SQLite's integrity check, and, opened again through SQLite's own unix
 * VFS, hold the same. Prints "ok: …" and exits 0, or says what differed and exits 1; a sanitizer's finding aborts.
 */
#include "sqlite3.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sqlite3_walcoalesce_init(sqlite3 *db, char **error, const sqlite3_api_routines *api);

#define ROWS 4000
#define LARGEST 60000

static long long model[ROWS];   /* a committed row's checksum; 0: no such row */
static long long pending[ROWS]; /* the same, as the transaction under way leaves it */
static unsigned seed;

static unsigned draw(unsigned below) {
  seed = seed * 1103515245u + 12345u;
  return (seed >> 8) % below;
}

static void fail(sqlite3 *db, const char *what) {
  fprintf(stderr, "%s: %s\n", what, db != 0 ? sqlite3_errmsg(db) : "");
  exit(1);
}

static void run(sqlite3 *db, const char *sql) {
  if (sqlite3_exec(db, sql, 0, 0, 0) != SQLITE_OK) fail(db, sql);
}

static void step(sqlite3 *db, sqlite3_stmt *statement, const char *what) {
  if (sqlite3_step(statement) != SQLITE_DONE) fail(db, what);
  sqlite3_reset(statement);
}

/* What `db` sees must be what the model says: as many rows, and the same sum of their checksums. */
static void expectModel(sqlite3 *db, const char *when, int transaction) {
  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(db, "SELECT count(*), coalesce(sum(h), 0) FROM kv", -1, &s, 0) != SQLITE_OK) fail(db, "prepare");
  if (sqlite3_step(s) != SQLITE_ROW) fail(db, "count");
  long long rows = sqlite3_column_int64(s, 0), sum = sqlite3_column_int64(s, 1), wantRows = 0, wantSum = 0;
  sqlite3_finalize(s);
  for (int id = 0; id < ROWS; id++) {
    if (model[id] != 0) wantRows++, wantSum += model[id];
  }
  if (rows != wantRows || sum != wantSum) {
    fprintf(stderr, "after transaction %d, %s: %lld rows (checksums %lld), the model says %lld (%lld)\n", transaction, when, rows, sum, wantRows, wantSum);
    exit(1);
  }
}

/* One transaction of random writes on `db`: committed, or (a fifth of them) rolled back. */
static void transaction(sqlite3 *db, sqlite3_stmt *put, sqlite3_stmt *del, int large) {
  static unsigned char value[LARGEST];
  int ops = large ? 150 + draw(150) : 1 + draw(40);
  memcpy(pending, model, sizeof model);
  run(db, "BEGIN IMMEDIATE");
  for (int op = 0; op < ops; op++) {
    int id = (int)draw(ROWS);
    if (draw(5) == 0) {
      sqlite3_bind_int(del, 1, id);
      step(db, del, "delete");
      pending[id] = 0;
      continue;
    }
    int length = large ? 20000 + (int)draw(LARGEST - 20000) : 10 + (int)draw(3000);
    long long checksum = 1;
    for (int i = 0; i < length; i++) {
      value[i] = (unsigned char)draw(256);
      checksum += value[i] * (i % 7 + 1);
    }
    sqlite3_bind_int(put, 1, id);
    sqlite3_bind_blob(put, 2, value, length, SQLITE_STATIC);
    sqlite3_bind_int64(put, 3, checksum);
    step(db, put, "insert");
    pending[id] = checksum;
  }
  if (draw(5) == 0) {
    run(db, "ROLLBACK");
  } else {
    run(db, "COMMIT");
    memcpy(model, pending, sizeof model);
  }
}

static void removeDatabase(const char *file) {
  char path[4096];
  remove(file);
  snprintf(path, sizeof path, "%s-wal", file);
  remove(path);
  snprintf(path, sizeof path, "%s-shm", file);
  remove(path);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s FILE TRANSACTIONS SEED\n", argv[0]);
    return 2;
  }
  const char *file = argv[1];
  int transactions = atoi(argv[2]);
  seed = (unsigned)strtoul(argv[3], 0, 10);
  removeDatabase(file);

  /* Loaded as the engine loads it: on a connection of its own, registering the VFS as the default one. */
  sqlite3 *loader;
  if (sqlite3_open(":memory:", &loader) != SQLITE_OK) fail(loader, "open :memory:");
  if (sqlite3_walcoalesce_init(loader, 0, 0) != SQLITE_OK_LOAD_PERMANENTLY) fail(loader, "sqlite3_walcoalesce_init");

  sqlite3 *db[2];
  sqlite3_stmt *put[2], *del[2];
  for (int c = 0; c < 2; c++) {
    if (sqlite3_open(file, &db[c]) != SQLITE_OK) fail(db[c], "open");
    sqlite3_busy_timeout(db[c], 5000);
    char *vfs = 0;
    sqlite3_file_control(db[c], "main", SQLITE_FCNTL_VFSNAME, &vfs);
    if (vfs == 0 || strncmp(vfs, "wal-coalesce/", 13) != 0) fail(0, "the database was not opened through the VFS");
    sqlite3_free(vfs);
  }
  run(db[0], "PRAGMA journal_mode = WAL; CREATE TABLE kv (id INTEGER PRIMARY KEY, v BLOB NOT NULL, h INTEGER NOT NULL);"
             "CREATE INDEX kv_h ON kv (h, id)");
  run(db[1], "PRAGMA cache_size = 50"); /* the second connection spills frames in the middle of most transactions */
  for (int c = 0; c < 2; c++) {
    if (sqlite3_prepare_v2(db[c], "INSERT OR REPLACE INTO kv (id, v, h) VALUES (?, ?, ?)", -1, &put[c], 0) != SQLITE_OK) fail(db[c], "prepare");
    if (sqlite3_prepare_v2(db[c], "DELETE FROM kv WHERE id = ?", -1, &del[c], 0) != SQLITE_OK) fail(db[c], "prepare");
  }

  static const char *checkpoints[] = {
    "PRAGMA wal_checkpoint(PASSIVE)", "PRAGMA wal_checkpoint(FULL)", "PRAGMA wal_checkpoint(RESTART)", "PRAGMA wal_checkpoint(TRUNCATE)",
  };
  for (int t = 0; t < transactions; t++) {
    int c = (int)draw(2);
    run(db[c], draw(2) ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    transaction(db[c], put[c], del[c], draw(40) == 0);
    expectModel(db[1 - c], "seen by the other connection", t);
    expectModel(db[c], "seen by the writing connection", t);
    if (draw(12) == 0) run(db[draw(2)], checkpoints[draw(4)]);
  }

  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(db[0], "PRAGMA integrity_check", -1, &s, 0) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) fail(db[0], "integrity_check");
  if (strcmp((const char *)sqlite3_column_text(s, 0), "ok") != 0) {
    fprintf(stderr, "integrity_check: %s\n", sqlite3_column_text(s, 0));
    return 1;
  }
  sqlite3_finalize(s);
  long long asked = 0, made = 0;
  if (sqlite3_prepare_v2(loader, "SELECT wal_coalesce_writes(0), wal_coalesce_writes(1)", -1, &s, 0) != SQLITE_OK) fail(loader, "wal_coalesce_writes");
  if (sqlite3_step(s) == SQLITE_ROW) asked = sqlite3_column_int64(s, 0), made = sqlite3_column_int64(s, 1);
  sqlite3_finalize(s);
  for (int c = 0; c < 2; c++) {
    sqlite3_finalize(put[c]);
    sqlite3_finalize(del[c]);
    if (sqlite3_close(db[c]) != SQLITE_OK) fail(db[c], "close");
  }

  sqlite3 *plain;
  if (sqlite3_open_v2(file, &plain, SQLITE_OPEN_READWRITE, "unix") != SQLITE_OK) fail(plain, "open through the unix VFS");
  expectModel(plain, "opened again through SQLite's own VFS", transactions);
  sqlite3_close(plain);
  sqlite3_close(loader);
  if (made == 0 || made >= asked) {
    fprintf(stderr, "the log's writes: %lld asked, %lld made: nothing was written a commit at a time\n", asked, made);
    return 1;
  }
  printf("ok: %d transactions, the log's writes %lld asked, %lld made\n", transactions, asked, made);
  return 0;
}
