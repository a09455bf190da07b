/**
 * Structured JSON-lines logging for Nest and the engine, one object per line.
 * Every line passes through the redactor, so a secret that reaches a message
 * (an upstream error echoing a header, a misconfigured value) is never written.
 */
import type { LoggerService } from '@nestjs/common';
import type { LogLevel } from '../config/config.js';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
/** Nest's start-up chatter (every module and route) is useful only when debugging. */
const CHATTY_CONTEXTS = new Set(['InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestFactory']);

export class Redactor {
  private readonly secrets: string[];

  constructor(secrets: string[]) {
    // Longest first, so a secret that contains another is replaced whole.
    // Lines are redacted as JSON text, where a secret holding `"`, `\` or a control character appears escaped.
    const forms = secrets.filter((s) => s.length >= 4).flatMap((s) => [s, JSON.stringify(s).slice(1, -1)]);
    this.secrets = [...new Set(forms)].sort((a, b) => b.length - a.length);
  }

  redact(text: string): string {
    let out = text;
    for (const secret of this.secrets) if (out.includes(secret)) out = out.split(secret).join('[redacted]');
    return out.replace(/(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, '$1[redacted]');
  }
}

export class JsonLogger implements LoggerService {
  constructor(
    private readonly level: LogLevel,
    private readonly redactor: Redactor,
    private readonly write: (line: string) => void = (line) => process.stdout.write(line),
  ) {}

  log(message: unknown, ...rest: unknown[]): void {
    const context = rest[rest.length - 1];
    this.emit(typeof context === 'string' && CHATTY_CONTEXTS.has(context) ? 'debug' : 'info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.emit('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.emit('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.emit('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.emit('debug', message, rest);
  }

  private emit(level: LogLevel, message: unknown, rest: unknown[]): void {
    if (ORDER[level] < ORDER[this.level]) return;
    // Nest passes (message, stack?, context?): a trailing string is the context unless it looks like a stack.
    const last = rest[rest.length - 1];
    const context = typeof last === 'string' && !isStack(last) ? (rest.pop() as string) : undefined;
    const entry: Record<string, unknown> = {};
    if (message !== null && typeof message === 'object' && !(message instanceof Error)) Object.assign(entry, message);
    else entry.msg = message instanceof Error ? message.message : String(message);
    if (typeof rest[0] === 'string') entry.stack = rest[0];
    else if (message instanceof Error && message.stack) entry.stack = message.stack;
    // Written last, so a logged object cannot overwrite them.
    entry.time = new Date().toISOString();
    entry.level = level;
    if (context) entry.context = context;
    this.write(`${this.redactor.redact(safeStringify(entry))}\n`);
  }
}

function isStack(text: string): boolean {
  return /\n\s+at /.test(text);
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    return JSON.stringify({ msg: '[unserialisable log entry]' });
  }
}
