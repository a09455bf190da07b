/**
 * Rule files → loaded rules. A folder is read recursively in path order, so
 * when two files define the same id the result does not depend on the file
 * system: the first path wins and the later one gets the problem. A bad rule
 * never hides the good ones, not even those next to it in the same array file.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { jsonPath } from './rule-schema.js';
import { validateRule } from './rule-validation.js';
import type { LoadedRule, RuleDefinition, RuleProblem, RuleSource } from './rule.types.js';

export interface RuleFiles {
  rules: LoadedRule[];
  problems: RuleProblem[];
  /** Every file read, as shown in problems. */
  files: string[];
  /** Each file's modification time and size as it was read (`files`' order; '' where it could not be read): ruleFilesChanged. */
  stamps: string[];
}

/** What {@link ruleFilesChanged} compares a folder with: the files of a read and their stamps. */
export type RuleFilesRead = Pick<RuleFiles, 'files' | 'stamps'>;

/** A valid rule of a file; `index` is its position when the file holds an array. */
export interface ParsedRule {
  definition: RuleDefinition;
  index?: number;
}

const SCHEMA_FILE = 'rule.schema.json';

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([key, item]) => [key, canonical(item)]));
}

/** First 16 hex characters of the SHA-256 of the definition's JSON with sorted keys. */
export function ruleVersion(definition: RuleDefinition): string {
  return createHash('sha256').update(JSON.stringify(canonical(definition))).digest('hex').slice(0, 16);
}

/** A validated definition as the engine keeps it, whether it came from a file or the admin API. */
export function toLoadedRule(definition: RuleDefinition, source: RuleSource): LoadedRule {
  return {
    id: definition.id,
    definition,
    source,
    version: ruleVersion(definition),
    triggers: definition.schedule !== undefined ? ['schedule.fired'] : [definition.on ?? []].flat(),
    priority: definition.priority ?? 1,
    enabled: definition.enabled ?? true,
  };
}

function parseError(error: unknown): string {
  const message = (error as Error).message.replace(/\s+/g, ' ');
  return `invalid JSON: ${message}`;
}

function withLineAndColumn(message: string, text: string): string {
  const position = /at position (\d+)/.exec(message)?.[1];
  if (position === undefined) return message;
  const before = text.slice(0, Number(position)).split('\n');
  return `${message} (line ${before.length}, column ${before[before.length - 1].length + 1})`;
}

/** The rules and problems of one file's text; `file` is only used to name problems. */
export function parseRuleFile(text: string, file: string): { rules: ParsedRule[]; problems: RuleProblem[] } {
  let json: unknown;
  try {
    json = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    return { rules: [], problems: [{ file, path: '$', message: withLineAndColumn(parseError(error), text) }] };
  }
  const items = Array.isArray(json) ? json.map((item: unknown, index) => ({ item, index })) : [{ item: json, index: undefined }];
  const rules: ParsedRule[] = [];
  const problems: RuleProblem[] = [];
  for (const { item, index } of items) {
    const found = validateRule(item, file, index);
    if (found.length === 0) rules.push({ definition: item as RuleDefinition, index });
    problems.push(...found);
  }
  return { rules, problems };
}

/** How problems name a file: inside the working directory, relative to it; elsewhere, absolute. */
export function displayPath(path: string): string {
  const fromCwd = relative(process.cwd(), resolve(path));
  return fromCwd === '' || fromCwd.startsWith('..') || isAbsolute(fromCwd) ? resolve(path) : fromCwd;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false; // a dangling link is not a rule file
  }
}

/** Rule file paths under `dir`, relative to it with `/`, sorted. */
async function listRuleFiles(dir: string, prefix = ''): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    // Dot-folders hold editor and VCS state; node_modules holds other people's JSON.
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    if (entry.isDirectory()) found.push(...(await listRuleFiles(dir, path)));
    else if (entry.name.endsWith('.json') && entry.name !== SCHEMA_FILE) {
      if (entry.isFile() || (entry.isSymbolicLink() && (await isFile(join(dir, path))))) found.push(path);
    }
  }
  return found.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

interface FileText {
  text: string;
  stamp: string;
}

function stampOf(stats: { mtimeMs: number; size: number }): string {
  return `${stats.mtimeMs}:${stats.size}`;
}

/**
 * A file's text, read synchronously: a thousand small files take 23–31 ms
 * so, against 142–252 ms through fs/promises (each step a round trip to
 * libuv's thread pool; the engine's start waits for them, session 70). The
 * parsing and validation that follow hold the thread longer than this does.
 */
function readText(path: string, file: string): FileText | RuleProblem {
  try {
    const fd = openSync(path, 'r');
    try {
      // Stamped from the same open file: a change after this read has another time or size.
      const stats = fstatSync(fd);
      return { text: readFileSync(fd, 'utf8'), stamp: stampOf(stats) };
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    return { file, path: '$', message: `cannot read file: ${(error as Error).message}` };
  }
}

function loadFiles(base: string, paths: string[]): RuleFiles {
  const result: RuleFiles = { rules: [], problems: [], files: [], stamps: [] };
  const owners = new Map<string, string>();
  const texts = paths.map((path) => readText(join(base, path), displayPath(join(base, path))));
  for (const [i, path] of paths.entries()) {
    const file = displayPath(join(base, path));
    result.files.push(file);
    const read = texts[i]!;
    if (!('text' in read)) {
      result.stamps.push('');
      result.problems.push(read);
      continue;
    }
    result.stamps.push(read.stamp);
    const parsed = parseRuleFile(read.text, file);
    result.problems.push(...parsed.problems);
    for (const { definition, index } of parsed.rules) {
      const owner = owners.get(definition.id);
      if (owner === undefined) {
        owners.set(definition.id, file);
        result.rules.push(toLoadedRule(definition, { kind: 'file', path }));
      } else {
        const message = `duplicate rule id "${definition.id}": already defined in ${owner}`;
        result.problems.push({ file, path: jsonPath(['id'], index), message });
      }
    }
  }
  return result;
}

/**
 * Every `*.json` under `dir` (except `rule.schema.json`, dot-folders and
 * node_modules). Rule sources are relative to `dir`; problems name files
 * relative to the working directory.
 * @throws when `dir` cannot be listed (e.g. it does not exist).
 */
export async function loadRuleFiles(dir: string): Promise<RuleFiles> {
  return loadFiles(dir, await listRuleFiles(dir));
}

/**
 * A folder (as {@link loadRuleFiles}) or a single rule file, whose source path is its name.
 * @throws when `path` does not exist.
 */
export async function loadRulePath(path: string): Promise<RuleFiles> {
  if ((await stat(path)).isDirectory()) return loadRuleFiles(path);
  return loadFiles(dirname(path), [basename(path)]);
}

/** Files looked at at once: enough to keep the disk busy, few enough for any open-files limit. */
const READ_AHEAD = 64;

async function stampOrNothing(path: string): Promise<string> {
  try {
    return stampOf(await stat(path));
  } catch {
    return '';
  }
}

/**
 * Whether the rule files under `dir` differ from `read` (an earlier
 * {@link loadRuleFiles} of it): a file added, gone, or with another
 * modification time or size than when it was read. The file watcher asks
 * once its first look at the folder is done (rule-watcher.ts), for the
 * changes made between the read and then.
 */
export async function ruleFilesChanged(dir: string, read: RuleFilesRead): Promise<boolean> {
  const paths = await listRuleFiles(dir);
  if (paths.length !== read.files.length || paths.some((path, i) => displayPath(join(dir, path)) !== read.files[i])) return true;
  for (let i = 0; i < paths.length; i += READ_AHEAD) {
    const stamps = await Promise.all(paths.slice(i, i + READ_AHEAD).map((path) => stampOrNothing(join(dir, path))));
    if (stamps.some((stamp, j) => stamp === '' || stamp !== read.stamps[i + j])) return true;
  }
  return false;
}
