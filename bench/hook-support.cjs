/**
 * What the benchmark's `--require` hooks for the engine's `node` share
 * (sql-profile.cjs, pause-profile.cjs): the prototype of better-sqlite3's
 * statements, whose methods a hook wraps, and the summary each writes while
 * the process runs and as it exits.
 */
'use strict';
const { join } = require('node:path');
const { mkdirSync, writeFileSync } = require('node:fs');

/** better-sqlite3's Statement prototype (found through a statement of a connection in memory), or undefined without the driver. */
function statementPrototype() {
  let Database;
  try {
    Database = require(join(__dirname, '..', 'node_modules', 'better-sqlite3'));
  } catch {
    return undefined;
  }
  const probe = new Database(':memory:');
  try {
    return Object.getPrototypeOf(probe.prepare('SELECT 1'));
  } finally {
    probe.close();
  }
}

/**
 * Writes `<dir>/<name>-<pid>.json` (the summary) and `.txt` (its report) every `everyMs` and as the process exits;
 * makes `dir` first (a folder that was not there made the engine exit on the first write, ENOENT in a timer).
 */
function writeSummaryEvery(dir, name, summarize, report, everyMs) {
  mkdirSync(dir, { recursive: true });
  const base = join(dir, `${name}-${process.pid}`);
  const write = () => {
    const summary = summarize();
    writeFileSync(`${base}.json`, JSON.stringify(summary));
    writeFileSync(`${base}.txt`, report(summary));
  };
  setInterval(write, everyMs).unref();
  process.on('exit', write);
}

module.exports = { statementPrototype, writeSummaryEvery };
