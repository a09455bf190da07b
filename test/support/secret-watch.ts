/**
 * Known secrets must never leave the engine: not in any HTTP answer, not in any
 * log line. This is a jest setup file of the e2e project (setupFilesAfterEnv),
 * so it watches every end-to-end suite without the suites doing anything:
 *
 * - the global `fetch` is wrapped: every answer's headers and body are scanned
 *   for the watched values. The body is read from a clone, in the background,
 *   so callers see the original response untouched. This covers answers of the
 *   engine, of the simulator (its /v1 API and its /_sim control routes) and, for
 *   an engine running in this process, the service's answers to the engine.
 * - `startEngine`/`spawnEngine` register each engine's captured log lines.
 * - `afterAll` fails the test file if any answer or log held a watched value.
 *   The report names the secret and where it was seen, never the value itself.
 *
 * Requests are not scanned: the admin token and the API key are sent in
 * Authorization headers on purpose.
 */
import { TEST_ADMIN_TOKEN, TEST_API_KEY, TEST_SECRET } from './secrets.js';

/** Values shorter than this would match by accident (and are no secrets). */
const MIN_SECRET_LENGTH = 8;
/** How long afterAll waits for bodies still being read before it gives up on them. */
const SETTLE_MS = 10_000;

export interface Leak {
  secret: string;
  where: string;
}

type Fetch = typeof globalThis.fetch;

/** One set of watched values, captured logs and findings. The suite-wide one is `secretWatch`. */
export class SecretWatch {
  private readonly secrets = new Map<string, string>();
  private readonly logs: Array<{ where: string; lines: readonly string[] }> = [];
  private readonly leaks: Leak[] = [];
  private readonly reading = new Set<Promise<void>>();
  private answers = 0;

  /** Watches `value` from now on; `name` is how a finding refers to it. */
  watchSecret(value: string, name = `a secret of ${value.length} characters`): void {
    if (value.length >= MIN_SECRET_LENGTH && !this.secrets.has(value)) this.secrets.set(value, name);
  }

  /** A live array of log lines or chunks (it may keep growing); scanned when checked. */
  watchLog(where: string, lines: readonly string[]): void {
    this.logs.push({ where, lines });
  }

  /** The names of the watched secrets that occur in `text`. */
  secretsIn(text: string): string[] {
    return [...this.secrets].filter(([value]) => text.includes(value)).map(([, name]) => name);
  }

  /** `fetch` with every answer scanned; the caller gets the original response. */
  wrap(fetchImpl: Fetch): Fetch {
    const watched = async (input: Parameters<Fetch>[0], init?: Parameters<Fetch>[1]): Promise<Response> => {
      const response = await fetchImpl(input, init);
      this.inspect(describeRequest(input, init, response), response);
      return response;
    };
    return Object.assign(watched, { [WRAPPED]: true }) as Fetch;
  }

  /** Waits for bodies still being read, then lists every finding in answers and logs. */
  async findings(): Promise<Leak[]> {
    await Promise.race([Promise.allSettled([...this.reading]), new Promise((resolve) => setTimeout(resolve, SETTLE_MS).unref())]);
    const inLogs = this.logs.flatMap(({ where, lines }) => this.secretsIn(lines.join('')).map((secret) => ({ secret, where: `the log of ${where}` })));
    return [...this.leaks, ...inLogs];
  }

  /** How many answers were scanned (so a test can tell the watch is really on). */
  get answersSeen(): number {
    return this.answers;
  }

  private inspect(where: string, response: Response): void {
    this.answers++;
    const headers = [...response.headers].map(([name, value]) => `${name}: ${value}`).join('\n');
    for (const secret of this.secretsIn(headers)) this.leaks.push({ secret, where: `the headers of ${where}` });
    if (response.body === null) return;
    let copy: Response;
    try {
      copy = response.clone();
    } catch {
      return; // already used: nothing left to read
    }
    const reading = copy.text().then(
      (text) => {
        for (const secret of this.secretsIn(text)) this.leaks.push({ secret, where: `the body of ${where}` });
      },
      () => undefined, // cut off or aborted: the caller sees that error on its own copy
    );
    this.reading.add(reading);
    void reading.finally(() => this.reading.delete(reading));
  }
}

const WRAPPED = Symbol.for('engine-e2e.secretWatch.wrapped');

function describeRequest(input: Parameters<Fetch>[0], init: Parameters<Fetch>[1], response: Response): string {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const method = init?.method ?? (typeof input === 'object' && 'method' in input ? input.method : 'GET');
  // A URL may be long (a hostile test's query); the path is enough to find the request.
  return `the answer ${response.status} to ${method} ${url.slice(0, 200)}`;
}

/** True when `fetchImpl` is a watched fetch. */
export function isWatched(fetchImpl: unknown): boolean {
  return typeof fetchImpl === 'function' && (fetchImpl as unknown as Record<symbol, unknown>)[WRAPPED] === true;
}

// One watch per test file: kept on the global object, so every copy of this
// module the file loads (setup file, support modules) shares it.
const GLOBAL_KEY = Symbol.for('engine-e2e.secretWatch');
const holder = globalThis as unknown as Record<symbol, SecretWatch | undefined>;
export const secretWatch: SecretWatch = (holder[GLOBAL_KEY] ??= new SecretWatch());

/** Watches one more value in this test file (e.g. a secret an engine was started with). */
export function watchSecret(value: string, name?: string): void {
  secretWatch.watchSecret(value, name);
}

/** Registers an engine's captured log lines for the end-of-file check. */
export function watchLog(where: string, lines: readonly string[]): void {
  secretWatch.watchLog(where, lines);
}

function install(): void {
  watchSecret(TEST_SECRET, 'TEST_SECRET (the webhook secret)');
  watchSecret(TEST_API_KEY, 'TEST_API_KEY (the service API key)');
  watchSecret(TEST_ADMIN_TOKEN, 'TEST_ADMIN_TOKEN (the admin token)');
  if (!isWatched(globalThis.fetch)) globalThis.fetch = secretWatch.wrap(globalThis.fetch);
  afterAll(async () => {
    const leaks = await secretWatch.findings();
    if (leaks.length === 0) return;
    const lines = leaks.map((l) => `  - ${l.secret} appeared in ${l.where}`);
    throw new Error(`a known secret left the engine (${leaks.length} finding(s)):\n${[...new Set(lines)].join('\n')}`);
  }, SETTLE_MS + 5_000);
}

// Installed once per test file, and only under jest (support modules import this one too).
const INSTALLED = Symbol.for('engine-e2e.secretWatch.installed');
const flags = globalThis as unknown as Record<symbol, boolean | undefined>;
if (typeof afterAll === 'function' && !flags[INSTALLED]) {
  flags[INSTALLED] = true;
  install();
}
