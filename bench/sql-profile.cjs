/**
 * Where an engine's SQLite time goes, statement by statement and transaction by
 * transaction: a hook for the engine's `node` (`--require`), not part of the
 * engine. It wraps better-sqlite3's statements (run, all, get) and counts, per
 * statement text, calls and time, and per kind of transaction (named by its
 * first statement after BEGIN: intake's, the event loop's, the outcomes', …)
 * how many committed, their statements, the time of its statements in all and
 * of its COMMIT, and how long it held the thread from BEGIN to the end of its
 * COMMIT (its statements and the JavaScript between them: what a transaction
 * run whole elsewhere would take off the thread, as long as it awaits nothing
 * but its statements). Sessions 29 and 34 timed statements with such a hook;
 * this is it, kept.
 *
 *   BENCH_ENGINE_NODE_ARGS="--require $PWD/bench/sql-profile.cjs" BENCH_POSTGRES=off \
 *     npm run bench -- --only e2e --connection keep-alive
 *
 * Each engine process writes `sql-profile-<pid>.txt` (a table) and `.json` into
 * SQL_PROFILE_DIR (the system's temporary folder by default) every 2 s and as
 * it exits; warm-up included. Timing wraps every statement in two calls of
 * `performance.now()` (about 1 µs): compare kinds and statements with each
 * other, not the engine's speed with and without the hook.
 */
'use strict';
const { tmpdir } = require('node:os');
const { statementPrototype, writeSummaryEvery } = require('./hook-support.cjs');

/** A statement's text as one line, its start only. */
function shortText(sql) {
  const line = sql.replace(/\s+/g, ' ').trim();
  return line.length > 90 ? `${line.slice(0, 87)}...` : line;
}

function createProfile() {
  const statements = new Map();
  const transactions = new Map();
  let open = null;
  return {
    /** One statement ran for `ms`. */
    ran(sql, ms) {
      const text = shortText(sql);
      const counted = statements.get(text) ?? { calls: 0, ms: 0 };
      counted.calls += 1;
      counted.ms += ms;
      statements.set(text, counted);
      if (/^BEGIN/i.test(text)) {
        open = { kind: null, statements: 0, ms, begunAt: performance.now() - ms };
        return;
      }
      if (open === null) return;
      open.ms += ms;
      if (/^COMMIT/i.test(text)) {
        const kind = open.kind ?? '(nothing)';
        const counted = transactions.get(kind) ?? { commits: 0, statements: 0, ms: 0, commitMs: 0, heldMs: 0 };
        counted.commits += 1;
        counted.statements += open.statements;
        counted.ms += open.ms;
        counted.commitMs += ms;
        counted.heldMs += performance.now() - open.begunAt;
        transactions.set(kind, counted);
        open = null;
      } else if (/^ROLLBACK/i.test(text)) {
        open = null;
      } else {
        open.statements += 1;
        open.kind ??= text.slice(0, 60);
      }
    },
    summary() {
      const byTime = (a, b) => b[1].ms - a[1].ms;
      return {
        transactions: [...transactions].sort(byTime).map(([kind, t]) => ({ kind, ...t })),
        statements: [...statements].sort(byTime).map(([text, s]) => ({ text, ...s })),
      };
    },
  };
}

/** The summary as a table: the transactions by kind, then the 40 statements that took longest in all. */
function report({ transactions, statements }) {
  const us = (ms) => (ms * 1000).toFixed(0).padStart(9);
  const lines = ['transactions by their first statement: commits, statements each, µs each (statements, COMMIT, BEGIN to COMMIT), total ms (statements, BEGIN to COMMIT)'];
  for (const t of transactions) {
    lines.push(`${String(t.commits).padStart(8)} ${(t.statements / t.commits).toFixed(1).padStart(7)} ${us(t.ms / t.commits)} ${us(t.commitMs / t.commits)} ${us(t.heldMs / t.commits)} ${t.ms.toFixed(0).padStart(9)} ${t.heldMs.toFixed(0).padStart(9)}  ${t.kind}`);
  }
  lines.push('', 'statements: calls, µs each, total ms');
  for (const s of statements.slice(0, 40)) lines.push(`${String(s.calls).padStart(8)} ${(s.ms * 1000 / s.calls).toFixed(1).padStart(9)} ${s.ms.toFixed(0).padStart(9)}  ${s.text}`);
  return `${lines.join('\n')}\n`;
}

function install(profile) {
  const prototype = statementPrototype();
  if (prototype === undefined) return; // no SQLite driver: nothing to time
  for (const method of ['run', 'all', 'get']) {
    const original = prototype[method];
    prototype[method] = function timed(...params) {
      const started = performance.now();
      try {
        return original.apply(this, params);
      } finally {
        profile.ran(this.source, performance.now() - started);
      }
    };
  }
}

{
  const profile = createProfile();
  install(profile);
  writeSummaryEvery(process.env.SQL_PROFILE_DIR ?? tmpdir(), 'sql-profile', () => profile.summary(), report, 2_000);
}
