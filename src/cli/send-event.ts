/**
 * `npm run send-event -- EVENT_FILE [--url URL] [--secret S] [--scheme S]`:
 * posts an event file to the engine signed as the service signs it (SPEC
 * section 4). The file's bytes are sent exactly as read, never re-serialised,
 * because the signature covers the raw bytes. Exit codes: 0 the engine answered
 * 2xx, 1 it answered anything else, 2 usage, file or connection problem.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs as parseNodeArgs } from 'node:util';
import { signBody, type SignatureScheme } from '../intake/signature.js';
import { colors, isEntryFile, processContext, type CliContext } from './cli-output.js';

export const USAGE =
  'usage: npm run send-event -- EVENT_FILE [--url URL] [--secret S] [--scheme hmac-sha256|timestamped]\n' +
  '  --url     default http://127.0.0.1:$PORT/webhooks (PORT default 3000); a URL with no path gets /webhooks\n' +
  '  --secret  default $WEBHOOK_SECRET (the first one, when it lists several)\n' +
  '  --scheme  default $WEBHOOK_SIGNATURE_SCHEME or hmac-sha256';

const SCHEMES: readonly SignatureScheme[] = ['hmac-sha256', 'timestamped'];
const TIMEOUT_MS = 10_000;

export interface SendOptions {
  file: string;
  url: string;
  secret: string;
  scheme: SignatureScheme;
}

/** `showUsage: false` when the arguments were fine but something else is missing. */
type Parsed = { help: true } | { help: false; options: SendOptions } | { error: string; showUsage?: false };

/** A problem on our side of the wire (usage, file, connection): exit code 2. */
export class SendEventError extends Error {
  override name = 'SendEventError';
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function defaultUrl(env: CliContext['env']): string {
  return `http://127.0.0.1:${nonEmpty(env.PORT) ?? '3000'}/webhooks`;
}

/** The engine accepts several secrets (rotation); the service signs with one, the first. */
function firstSecret(list: string | undefined): string | undefined {
  return list?.split(',').map((s) => s.trim()).find((s) => s !== '');
}

export function parseArgs(args: readonly string[], env: CliContext['env']): Parsed {
  let parsed;
  try {
    parsed = parseNodeArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        secret: { type: 'string' },
        scheme: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    return { error: (error as Error).message };
  }
  const { values, positionals } = parsed;
  if (values.help) return { help: true };
  if (positionals.length !== 1) return { error: `expected one EVENT_FILE, got ${positionals.length}` };
  const given = nonEmpty(values.url) ?? defaultUrl(env);
  let target: URL;
  try {
    target = new URL(given);
  } catch {
    return { error: `--url is not a URL: ${given}` };
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:') return { error: `--url must be http:// or https://, got ${given}` };
  // The engine's base URL alone (no path) means its webhook endpoint: posted to `/`, the event would only get a 404.
  const url = target.pathname === '/' && target.search === '' ? new URL('/webhooks', target).href : given;
  const scheme = nonEmpty(values.scheme) ?? nonEmpty(env.WEBHOOK_SIGNATURE_SCHEME) ?? 'hmac-sha256';
  if (!SCHEMES.includes(scheme as SignatureScheme)) {
    return { error: `--scheme must be one of ${SCHEMES.join(', ')}, got "${scheme}"` };
  }
  // Only whether a secret came and from where is ever reported, never its value.
  const secret = values.secret !== undefined ? firstSecret(values.secret) : firstSecret(env.WEBHOOK_SECRET);
  if (secret === undefined) {
    const where = values.secret !== undefined ? '--secret is empty' : 'WEBHOOK_SECRET is not set';
    return { error: `no webhook secret: ${where}; pass --secret S or set WEBHOOK_SECRET to the engine's secret`, showUsage: false };
  }
  return { help: false, options: { file: positionals[0], url, secret, scheme: scheme as SignatureScheme } };
}

/** The file's bytes, unchanged, once they are known to hold JSON. */
export async function readEventFile(path: string): Promise<{ raw: Buffer; event: unknown }> {
  let raw: Buffer;
  try {
    raw = await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SendEventError(`event file not found: ${path}`);
    if (code === 'EISDIR') throw new SendEventError(`event file is a folder: ${path}`);
    throw new SendEventError(`cannot read event file ${path}: ${(error as Error).message}`);
  }
  try {
    return { raw, event: JSON.parse(raw.toString('utf8')) as unknown };
  } catch (error) {
    throw new SendEventError(`event file is not JSON: ${path}: ${(error as Error).message}`);
  }
}

export interface PostAnswer {
  status: number;
  statusText: string;
  body: string;
}

/** Why fetch failed, in words: undici reports "fetch failed" and hides the reason in `cause`. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? (error as { code?: string }).code;
  if ((error as Error).name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1000} s`;
  if (code === 'ECONNREFUSED') return 'connection refused (is the engine running? `npm start` or `npm run demo`)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'the connection was closed before an answer came';
  return cause?.message ?? (error as Error).message;
}

/** POSTs the raw bytes with the service's signature header. Network problems throw {@link SendEventError}. */
export async function postSignedEvent(
  url: string,
  raw: Buffer,
  secret: string,
  scheme: SignatureScheme,
  now: Date = new Date(),
): Promise<PostAnswer> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'automation-engine-send-event/0.1.0',
        'X-Service-Signature': signBody(raw, secret, scheme, now),
      },
      body: raw,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    throw new SendEventError(`cannot reach ${url}: ${networkReason(error)}`);
  }
  let body: string;
  try {
    body = await response.text();
  } catch (error) {
    throw new SendEventError(`${url} answered ${response.status} but the body could not be read: ${networkReason(error)}`);
  }
  return { status: response.status, statusText: response.statusText, body };
}

function describeEvent(event: unknown): string {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) return 'not an event object';
  const { id, type } = event as { id?: unknown; type?: unknown };
  const parts = [typeof type === 'string' ? type : 'no type', typeof id === 'string' ? id : 'no id'];
  return parts.join(' ');
}

/** Runs the command; returns the exit code. */
export async function sendEvent(args: readonly string[], context: CliContext): Promise<number> {
  const parsed = parseArgs(args, context.env);
  if ('error' in parsed) {
    context.stderr(`send-event: ${parsed.error}`);
    if (parsed.showUsage !== false) context.stderr(USAGE);
    return 2;
  }
  if (parsed.help) {
    context.stdout(USAGE);
    return 0;
  }
  const { file, url, secret, scheme } = parsed.options;
  const paint = colors(context.color);
  try {
    const { raw, event } = await readEventFile(file);
    context.stdout(paint.dim(`POST ${url}  ${file} (${describeEvent(event)}, ${raw.length} bytes, signed ${scheme})`));
    const answer = await postSignedEvent(url, raw, secret, scheme);
    const ok = answer.status >= 200 && answer.status < 300;
    const statusLine = `${answer.status} ${answer.statusText}`.trim();
    context.stdout(ok ? paint.green(statusLine) : paint.red(statusLine));
    if (answer.body !== '') context.stdout(answer.body);
    return ok ? 0 : 1;
  } catch (error) {
    if (!(error instanceof SendEventError)) throw error;
    context.stderr(`send-event: ${error.message}`);
    return 2;
  }
}

export async function main(): Promise<void> {
  process.exitCode = await sendEvent(process.argv.slice(2), processContext());
}

if (isEntryFile(import.meta.url)) await main();
