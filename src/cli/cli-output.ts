/**
 * What every CLI command needs to talk to a terminal: where lines go, whether
 * to colour them, plurals for summaries, and whether the module was started
 * as the program. Commands take a {@link CliContext} so tests can capture output.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface CliContext {
  env: Readonly<Record<string, string | undefined>>;
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  /** Whether stdout may carry ANSI colours. */
  color: boolean;
}

export type Paint = (text: string) => string;

export interface Colors {
  red: Paint;
  green: Paint;
  yellow: Paint;
  bold: Paint;
  dim: Paint;
}

/** Colours only on a terminal, and never when NO_COLOR is set (https://no-color.org). */
export function colorEnabled(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>): boolean {
  return stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === '');
}

function ansi(open: number, close: number, enabled: boolean): Paint {
  return enabled ? (text) => `\u001b[${open}m${text}\u001b[${close}m` : (text) => text;
}

export function colors(enabled: boolean): Colors {
  return {
    red: ansi(31, 39, enabled),
    green: ansi(32, 39, enabled),
    yellow: ansi(33, 39, enabled),
    bold: ansi(1, 22, enabled),
    dim: ansi(2, 22, enabled),
  };
}

/** `1 file`, `3 files`, `0 problems`. */
export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${count} ${count === 1 ? singular : pluralForm}`;
}

/** The real process's streams and environment. */
export function processContext(): CliContext {
  return {
    env: process.env,
    stdout: (line) => process.stdout.write(`${line}\n`),
    stderr: (line) => process.stderr.write(`${line}\n`),
    color: colorEnabled(process.stdout, process.env),
  };
}

function realPath(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

/** True when the module at `moduleUrl` is the script node was started with (not an import). */
export function isEntryFile(moduleUrl: string, argv1: string | undefined = process.argv[1]): boolean {
  if (argv1 === undefined) return false;
  const entry = realPath(argv1);
  return entry !== undefined && entry === realPath(fileURLToPath(moduleUrl));
}

/** A command line read into options, or help asked for, or a usage error. */
export type ParsedCommand<O> = { error: string } | { help: true } | { help: false; options: O };

/**
 * The part every rules command shares: a usage error prints the usage (exit 2),
 * `--help` prints it (exit 0), and an error of `usageError`'s class thrown while
 * running is a usage error too; anything else is the command's own exit code.
 */
export async function runCommand<O>(
  name: string,
  usage: string,
  parsed: ParsedCommand<O>,
  context: CliContext,
  run: (options: O) => Promise<number>,
  usageError: new (...args: never[]) => Error,
): Promise<number> {
  if ('error' in parsed) {
    context.stderr(`${name}: ${parsed.error}`);
    context.stderr(usage);
    return 2;
  }
  if (parsed.help) {
    context.stdout(usage);
    return 0;
  }
  try {
    return await run(parsed.options);
  } catch (error) {
    if (!(error instanceof usageError)) throw error;
    context.stderr(`${name}: ${error.message}`);
    return 2;
  }
}
