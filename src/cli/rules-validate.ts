/**
 * `npm run rules:validate [-- PATH]`: checks rule files the way the engine
 * loads them, without a database or a running engine. Exit codes: 0 all valid,
 * 1 problems found (one `file: json-path: message` line each), 2 usage error.
 */
import { stat } from 'node:fs/promises';
import { loadRulePath } from '../rules/rule-files.js';
import type { RuleProblem } from '../rules/rule.types.js';
import { colors, isEntryFile, plural, processContext, type CliContext, type Colors } from './cli-output.js';

export const USAGE = 'usage: npm run rules:validate [-- PATH]   (PATH: a rule file or folder; default $RULES_DIR or ./rules)';

type Parsed = { help: true } | { help: false; path: string } | { error: string };

export function parseArgs(args: readonly string[], env: CliContext['env']): Parsed {
  if (args.includes('-h') || args.includes('--help')) return { help: true };
  const option = args.find((arg) => arg.startsWith('-'));
  if (option !== undefined) return { error: `unknown option ${option}` };
  if (args.length > 1) return { error: `expected one PATH, got ${args.length}` };
  const fallback = env.RULES_DIR !== undefined && env.RULES_DIR.trim() !== '' ? env.RULES_DIR : './rules';
  return { help: false, path: args[0] ?? fallback };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export function problemLine(problem: RuleProblem, paint: Colors): string {
  return `${paint.bold(problem.file)}: ${paint.yellow(problem.path)}: ${problem.message}`;
}

export function summaryLine(files: number, rules: number, problems: number, paint: Colors): string {
  const text = `${plural(files, 'file')}, ${plural(rules, 'rule')} valid, ${plural(problems, 'problem')}`;
  return problems === 0 ? paint.green(text) : paint.red(text);
}

/** Runs the command; returns the exit code. */
export async function rulesValidate(args: readonly string[], context: CliContext): Promise<number> {
  const parsed = parseArgs(args, context.env);
  if ('error' in parsed) {
    context.stderr(`rules:validate: ${parsed.error}`);
    context.stderr(USAGE);
    return 2;
  }
  if (parsed.help) {
    context.stdout(USAGE);
    return 0;
  }
  if (!(await exists(parsed.path))) {
    context.stderr(`rules:validate: path not found: ${parsed.path}`);
    return 2;
  }
  let result;
  try {
    result = await loadRulePath(parsed.path);
  } catch (error) {
    context.stderr(`rules:validate: cannot read ${parsed.path}: ${(error as Error).message}`);
    return 2;
  }
  const paint = colors(context.color);
  for (const problem of result.problems) context.stdout(problemLine(problem, paint));
  context.stdout(summaryLine(result.files.length, result.rules.length, result.problems.length, paint));
  return result.problems.length === 0 ? 0 : 1;
}

export async function main(): Promise<void> {
  process.exitCode = await rulesValidate(process.argv.slice(2), processContext());
}

if (isEntryFile(import.meta.url)) await main();
