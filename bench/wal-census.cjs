/**
 * Which tables and indexes an engine's SQLite commits write to the log, page by
 * page: the write-ahead log is what a commit costs (each page a frame, two
 * `pwrite` calls and a checksum), so this says which b-tree of the schema that
 * cost is spent on. Not part of the engine; two uses in one file:
 *
 * 1. A hook for the engine's `node` (`--require`). It turns the engine's
 *    automatic checkpoints off (so the log keeps every frame), notes how many
 *    frames the log holds and how many events are stored WAL_CENSUS_FROM_MS
 *    after the start (10,000 by default: the benchmark's warm-up), and at
 *    WAL_CENSUS_TO_MS (18,000) copies the database and its log into
 *    WAL_CENSUS_DIR (the system's temporary folder by default; it writes
 *    wal-census.started.json there at the first mark, wal-census.json with
 *    the copy):
 *
 *      BENCH_ENGINE_NODE_ARGS="--require $PWD/bench/wal-census.cjs" BENCH_POSTGRES=off \
 *        npm run bench -- --only e2e --connection keep-alive
 *
 *    Without checkpoints the log grows for the whole run and every read looks
 *    through it: the engine runs slower than it does otherwise, and the run's
 *    figures are not the engine's. The pages it writes are.
 *
 * 2. A report of such a copy: `node bench/wal-census.cjs report [DIR]` reads
 *    the frames written between the two moments, one transaction at a time,
 *    names each page's b-tree (SQLite's `dbstat`, on a copy of the copy), and
 *    prints the frames per event by b-tree and, per kind of transaction (named
 *    by the tables it wrote, not their indexes), how many there were and what
 *    each wrote.
 *
 * A page is named by its b-tree at the end of the run; in a database that only
 * grows, as the benchmark's does, no page changes hands meanwhile.
 */
'use strict';
const { join, basename } = require('node:path');
const { tmpdir } = require('node:os');
const { copyFileSync, existsSync, mkdtempSync, openSync, readSync, closeSync, fstatSync, readFileSync, rmSync, writeFileSync } = require('node:fs');

const Database = require(join(__dirname, '..', 'node_modules', 'better-sqlite3'));

const WAL_HEADER = 32;
const FRAME_HEADER = 24;
const COPY = 'wal-census.sqlite';
const MARKS = 'wal-census.json';
/** Written at the first mark: the census has begun. */
const STARTED = 'wal-census.started.json';
/** Written instead of the copy when the hook fails (it leaves the engine running). */
const ERROR = 'wal-census.error.txt';

/** The log's frames, each its page number and whether it ends a transaction, up to the first that is not of this log. */
function readFrames(walFile) {
  if (!existsSync(walFile)) return { pageSize: 0, frames: [] };
  const fd = openSync(walFile, 'r');
  try {
    const header = Buffer.alloc(WAL_HEADER);
    if (readSync(fd, header, 0, WAL_HEADER, 0) < WAL_HEADER) return { pageSize: 0, frames: [] };
    const pageSize = header.readUInt32BE(8);
    const salt = [header.readUInt32BE(16), header.readUInt32BE(20)];
    const frames = [];
    const size = fstatSync(fd).size;
    const frameHeader = Buffer.alloc(FRAME_HEADER);
    for (let offset = WAL_HEADER; offset + FRAME_HEADER + pageSize <= size; offset += FRAME_HEADER + pageSize) {
      readSync(fd, frameHeader, 0, FRAME_HEADER, offset);
      if (frameHeader.readUInt32BE(8) !== salt[0] || frameHeader.readUInt32BE(12) !== salt[1]) break;
      frames.push({ page: frameHeader.readUInt32BE(0), commit: frameHeader.readUInt32BE(4) !== 0 });
    }
    return { pageSize, frames };
  } finally {
    closeSync(fd);
  }
}

/** The frames from `from` on, as transactions (a transaction's last frame ends it). */
function transactionsOf(frames, from) {
  const transactions = [];
  let open = [];
  for (let i = 0; i < frames.length; i++) {
    if (i < from) continue;
    open.push(frames[i].page);
    if (frames[i].commit) {
      transactions.push(open);
      open = [];
    }
  }
  return transactions;
}

/** Page 1 holds the file's header (its size in pages, the free list's): a commit that grows the file writes it too. */
const HEADER_PAGE = 'page 1 (the file header, and sqlite_schema)';
const namesNoTable = (name) => name.startsWith('idx_') || name.startsWith('sqlite_autoindex_') || name === HEADER_PAGE;

/** Frames per event by b-tree, and per kind of transaction (the tables it wrote, indexes left out of the name). */
function census(transactions, ownerOf, events) {
  const byTree = new Map();
  const byKind = new Map();
  for (const pages of transactions) {
    const trees = new Map();
    for (const page of pages) {
      const tree = ownerOf.get(page) ?? '(a page freed since)';
      trees.set(tree, (trees.get(tree) ?? 0) + 1);
      byTree.set(tree, (byTree.get(tree) ?? 0) + 1);
    }
    const kind = [...trees.keys()].filter((tree) => !namesNoTable(tree)).sort().join(', ') || '(indexes only)';
    const counted = byKind.get(kind) ?? { transactions: 0, frames: 0, trees: new Map() };
    counted.transactions += 1;
    counted.frames += pages.length;
    for (const [tree, n] of trees) counted.trees.set(tree, (counted.trees.get(tree) ?? 0) + n);
    byKind.set(kind, counted);
  }
  const frames = transactions.reduce((sum, pages) => sum + pages.length, 0);
  const perEvent = (n) => (events > 0 ? n / events : 0);
  return {
    events,
    transactions: transactions.length,
    frames,
    framesPerEvent: perEvent(frames),
    trees: [...byTree].sort((a, b) => b[1] - a[1]).map(([tree, n]) => ({ tree, frames: n, perEvent: perEvent(n) })),
    kinds: [...byKind]
      .sort((a, b) => b[1].frames - a[1].frames)
      .map(([kind, k]) => ({
        kind,
        transactions: k.transactions,
        framesEach: k.frames / k.transactions,
        trees: [...k.trees].sort((a, b) => b[1] - a[1]).map(([tree, n]) => ({ tree, each: n / k.transactions })),
      })),
  };
}

/** Reads a copy the hook left in `dir`: its summary (also written there as wal-census-report.json). */
function report(dir) {
  const marks = JSON.parse(readFileSync(join(dir, MARKS), 'utf8'));
  const { frames } = readFrames(join(dir, `${COPY}-wal`));
  // dbstat on a copy of the copy: opening a database with its log may checkpoint it and remove the log on closing.
  const scratch = mkdtempSync(join(tmpdir(), 'wal-census-'));
  try {
    copyFileSync(join(dir, COPY), join(scratch, COPY));
    copyFileSync(join(dir, `${COPY}-wal`), join(scratch, `${COPY}-wal`));
    const db = new Database(join(scratch, COPY));
    try {
      const ownerOf = new Map(db.prepare('SELECT pageno, name FROM dbstat').all().map((row) => [row.pageno, row.name]));
      ownerOf.set(1, HEADER_PAGE);
      const stored = marks.eventsTable ? db.prepare('SELECT COUNT(*) AS n FROM events').get().n : 0;
      const summary = census(transactionsOf(frames, marks.fromFrame), ownerOf, stored - marks.fromEvents);
      writeFileSync(join(dir, 'wal-census-report.json'), `${JSON.stringify(summary, null, 2)}\n`);
      return summary;
    } finally {
      db.close();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function format(summary) {
  const lines = [
    `${summary.events} events stored, ${summary.transactions} transactions, ${summary.frames} frames: ${summary.framesPerEvent.toFixed(2)} frames an event`,
    'frames an event, by b-tree:',
    ...summary.trees.map((t) => `  ${t.perEvent.toFixed(3).padStart(7)}  ${t.tree}`),
    'by kind of transaction (the tables it wrote): how many, frames each, and each b-tree\'s frames in one:',
  ];
  for (const kind of summary.kinds) {
    lines.push(`  ${String(kind.transactions).padStart(6)}  ${kind.framesEach.toFixed(1).padStart(5)}  ${kind.kind}`);
    for (const t of kind.trees) lines.push(`                ${t.each.toFixed(2).padStart(6)}  ${t.tree}`);
  }
  return lines.join('\n');
}

/** The hook: the engine's connection without automatic checkpoints, and the log copied at the second mark. */
function hook() {
  const dir = process.env.WAL_CENSUS_DIR ?? tmpdir();
  const from = Number(process.env.WAL_CENSUS_FROM_MS ?? 10_000);
  const to = Number(process.env.WAL_CENSUS_TO_MS ?? 18_000);
  let connection = null;
  const pragma = Database.prototype.pragma;
  Database.prototype.pragma = function censusPragma(source, options) {
    if (/^\s*wal_autocheckpoint\s*=/i.test(source) && this.name !== ':memory:') {
      connection = this;
      return pragma.call(this, 'wal_autocheckpoint = 0', options);
    }
    return pragma.call(this, source, options);
  };
  let marks = null;
  // A hook must not bring the engine down: what goes wrong is written beside the copy instead.
  const guarded = (step) => () => {
    try {
      step();
    } catch (error) {
      const told = `wal-census: ${error instanceof Error ? error.stack : String(error)}\n`;
      try {
        writeFileSync(join(dir, ERROR), told);
      } catch {
        process.stderr.write(told);
      }
    }
  };
  setTimeout(guarded(() => {
    if (connection === null || !connection.open) return;
    const hasEvents = connection.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() !== undefined;
    marks = {
      file: connection.name,
      fromFrame: readFrames(`${connection.name}-wal`).frames.length,
      fromEvents: hasEvents ? connection.prepare('SELECT COUNT(*) AS n FROM events').get().n : 0,
      eventsTable: hasEvents,
    };
    writeFileSync(join(dir, STARTED), `${JSON.stringify(marks)}\n`);
  }), from).unref();
  setTimeout(guarded(() => {
    if (marks === null || !connection.open) return;
    copyFileSync(marks.file, join(dir, COPY));
    copyFileSync(`${marks.file}-wal`, join(dir, `${COPY}-wal`));
    writeFileSync(join(dir, MARKS), `${JSON.stringify(marks)}\n`);
  }), to).unref();
}

if (require.main === module) {
  const [command, dir = tmpdir()] = process.argv.slice(2);
  if (command !== 'report' || !existsSync(join(dir, MARKS))) {
    process.stderr.write(`usage: node bench/${basename(__filename)} report [DIR]  (DIR holds the copy the hook made: ${MARKS})\n`);
    process.exit(2);
  }
  process.stdout.write(`${format(report(dir))}\n`);
} else {
  hook();
}
