/**
 * `npm run bench:instructions -- --functions N`: where an event's instructions
 * go, by function, JavaScript included. callgrind names native functions
 * (SQLite, V8's runtime, libc) but shows code V8 compiled as bare addresses;
 * node's `--perf-basic-prof` writes, as it compiles, which function each
 * address range holds (/tmp/perf-<pid>.map, the format perf reads). Here the
 * two are put together: callgrind_annotate's counts, self and inclusive, with
 * each address named by the map, and each function of the engine's bundle
 * named by the module it came from (esbuild marks each module's start with a
 * `// <path>` comment).
 *
 * Inclusive counts of functions that call each other through promises are
 * rough (callgrind follows calls, not awaits): read them as "under this
 * function somewhere", and the self counts as exact.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

interface Range {
  start: number;
  end: number;
  name: string;
}

/** The perf map's ranges, by start; a later entry for the same code (recompiled, moved) comes later in the file and wins. */
export function rangesOf(map: string): Range[] {
  const ranges: Range[] = [];
  for (const line of map.split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (match) ranges.push({ start: parseInt(match[1]!, 16), end: parseInt(match[1]!, 16) + parseInt(match[2]!, 16), name: match[3]! });
  }
  return ranges.sort((a, b) => a.start - b.start);
}

/** The name of the code at `address`, if a range holds it (the last one starting at or before it that covers it). */
export function nameAt(ranges: Range[], address: number): string | undefined {
  let low = 0;
  let high = ranges.length - 1;
  let at = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (ranges[middle]!.start <= address) {
      at = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  // Ranges may overlap (code freed and its memory reused): look back a little for one that covers the address.
  for (let i = at; i >= 0 && i > at - 64; i--) if (ranges[i]!.end > address && ranges[i]!.start <= address) return ranges[i]!.name;
  return undefined;
}

/** For a bundle: the module each line belongs to, from esbuild's `// path` comments. */
function modulesOf(bundle: string): (line: number) => string | undefined {
  const starts: Array<{ line: number; module: string }> = [];
  bundle.split('\n').forEach((text, i) => {
    const match = /^\/\/ ((?:dist-bench|dist|node_modules)\/\S+)$/.exec(text);
    if (match) starts.push({ line: i + 1, module: match[1]!.replace(/^dist(-bench)?\//, '').replace(/\.js$/, '') });
  });
  return (line) => {
    let found: string | undefined;
    for (const start of starts) {
      if (start.line > line) break;
      found = start.module;
    }
    return found;
  };
}

/** `JS:*name file:///…/main.js:12:3` → `name (src/x/y:12)`; V8's tier marks (`*` optimized, `^` baseline, `~` interpreted) dropped. */
function readable(name: string, bundleFile: string, moduleAt: ((line: number) => string | undefined) | undefined): string {
  const js = /^JS:[*^~+]?(\S*) (\S+):(\d+):\d+$/.exec(name);
  if (!js) return name.replace(/^JS:/, '');
  const [, fn, url, line] = js;
  const where = url!.endsWith(bundleFile) && moduleAt ? `${moduleAt(Number(line)) ?? 'bundle'}` : url!.replace(/^file:\/\/.*\//, '');
  return `${fn || '(anonymous)'} (${where}:${line})`;
}

interface Counted {
  name: string;
  instructions: number;
}

/** callgrind_annotate's lines of counts: `  1,234 (12.3%)  file:function [object]`. */
function annotated(countsFile: string, inclusive: boolean): { total: number; rows: Counted[] } {
  const text = execFileSync('callgrind_annotate', [`--inclusive=${inclusive ? 'yes' : 'no'}`, '--threshold=100', countsFile], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  let total = 0;
  const rows: Counted[] = [];
  for (const line of text.split('\n')) {
    const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!match) continue;
    const instructions = Number(match[1]!.replace(/,/g, ''));
    if (match[2]!.includes('PROGRAM TOTALS')) total = instructions;
    else rows.push({ name: match[2]!.replace(/\s+\[[^\]]*\]$/, ''), instructions });
  }
  return { total, rows };
}

/** The top `count` functions of a thread's counts, self and inclusive, per event. */
export function functionsReport(countsFile: string, perfMapFile: string, bundleFile: string, events: number, count: number): string[] {
  const ranges = existsSync(perfMapFile) ? rangesOf(readFileSync(perfMapFile, 'utf8')) : [];
  const moduleAt = existsSync(bundleFile) ? modulesOf(readFileSync(bundleFile, 'utf8')) : undefined;
  const bundleName = bundleFile.split('/').pop()!;
  const lines: string[] = [];
  for (const inclusive of [false, true]) {
    const { total, rows } = annotated(countsFile, inclusive);
    const byName = new Map<string, number>();
    const javascript = new Set<string>();
    for (const row of rows) {
      const address = /^\?\?\?:0x([0-9a-f]+)$/.exec(row.name);
      const named = address ? nameAt(ranges, parseInt(address[1]!, 16)) : undefined;
      if (address && named === undefined) continue; // code V8 freed before the map could name it: left out
      const name = named ? readable(named, bundleName, moduleAt) : row.name.replace(/^\?\?\?:/, '');
      if (named?.startsWith('JS:')) javascript.add(name);
      // One function compiled in several tiers is several ranges: self counts add up; inclusive ones overlap, the largest is kept.
      byName.set(name, inclusive ? Math.max(byName.get(name) ?? 0, row.instructions) : (byName.get(name) ?? 0) + row.instructions);
    }
    lines.push(`${inclusive ? 'inclusive (JavaScript functions only; rough across awaits)' : 'self'}: instructions per event, share of the main thread`);
    const shown = [...byName].filter(([name]) => !inclusive || javascript.has(name)).sort((a, b) => b[1] - a[1]).slice(0, count);
    for (const [name, instructions] of shown) {
      lines.push(`  ${Math.round(instructions / events).toLocaleString('en-US').padStart(9)}  ${((100 * instructions) / total).toFixed(2).padStart(5)} %  ${name.slice(0, 140)}`);
    }
  }
  return lines;
}
