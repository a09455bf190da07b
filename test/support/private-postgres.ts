/**
 * A PostgreSQL server of one test's own, for suites that stop and start the
 * server under a running engine: the machine's server on 5432 is shared by the
 * other suites (and other runs), and restarting it would fail them.
 *
 *   const runnable = PrivatePostgres.canRun('postgres restart');      // false: skipped (said why)
 *   beforeAll(async () => (server = await PrivatePostgres.create()));
 *   afterAll(() => server?.remove());
 *   const url = await server.createDatabase();                        // postgres://postgres@127.0.0.1:<port>/engine_<n>
 *   await server.stop('fast');  await server.start();                 // a restart, same port and data
 *   await server.remove();                                            // stopped at once, folder deleted
 *
 * The cluster is made with initdb in a temp folder (trust authentication,
 * fsync off: nothing here must survive a power cut), listens on a free port of
 * 127.0.0.1 and keeps its socket in that folder. PostgreSQL refuses to run as
 * root, so as root (CI) the binaries run as the `postgres` OS user through
 * runuser, and the folder is handed to that user. Without the binaries (or,
 * as root, without that user) the suite is skipped and says so, or fails with
 * REQUIRE_POSTGRES=1 (as databases.ts does for the shared server). A server
 * that its test never removed (a suite that failed to load, a killed run) is
 * stopped by a watchdog once the test process is gone (an exit handler would
 * not do: jest's sandbox never calls it, and a SIGKILL skips it).
 */
import { execFile, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { withPostgresClient } from './databases.js';
import { onFreePort } from './ports.js';

const run = promisify(execFile);

const OS_USER = 'postgres';
/** pg_ctl's own wait for start and stop, in seconds. */
const PG_CTL_WAIT_S = 30;

interface Binaries {
  bin: string;
  /** As root: the uid and gid of the `postgres` OS user. */
  asUser?: { uid: number; gid: number };
}

/** The newest /usr/lib/postgresql/<version>/bin holding initdb, pg_ctl and postgres (or PRIVATE_POSTGRES_BIN). */
function findBin(): string | undefined {
  const candidates = process.env.PRIVATE_POSTGRES_BIN
    ? [process.env.PRIVATE_POSTGRES_BIN]
    : existsSync('/usr/lib/postgresql')
      ? readdirSync('/usr/lib/postgresql')
          .filter((v) => /^\d+$/.test(v))
          .sort((a, b) => Number(b) - Number(a))
          .map((v) => `/usr/lib/postgresql/${v}/bin`)
      : [];
  return candidates.find((bin) => ['initdb', 'pg_ctl', 'postgres'].every((tool) => existsSync(join(bin, tool))));
}

/** The uid and gid of an OS user from /etc/passwd, or undefined. */
function osUser(name: string): { uid: number; gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** What is needed to run a private server here, or why it cannot be. */
function binaries(): Binaries | string {
  const bin = findBin();
  if (!bin) return 'no PostgreSQL server binaries (initdb, pg_ctl, postgres) in /usr/lib/postgresql/<version>/bin or PRIVATE_POSTGRES_BIN';
  if (userInfo().uid !== 0) return { bin };
  const asUser = osUser(OS_USER);
  if (!asUser) return `running as root, and there is no \`${OS_USER}\` OS user to run PostgreSQL as (it refuses root)`;
  if (!existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser')) return 'running as root, and runuser is missing (needed to run PostgreSQL as another user)';
  return { bin, asUser };
}

export class PrivatePostgres {
  private running = false;

  private constructor(
    private readonly tools: Binaries,
    /** Holds the cluster (data/), its socket and its log. */
    readonly dir: string,
  ) {}

  /** Set by the first start (a free port), kept for the restarts. */
  private listensOn = 0;

  /** Stays the same across stop() and start(). */
  get port(): number {
    return this.listensOn;
  }

  /** The server's maintenance database, for the test's own statements. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** A new empty database on this server (for one engine); its URL. */
  async createDatabase(): Promise<string> {
    const name = `engine_${randomBytes(4).toString('hex')}`;
    await withPostgresClient(this.url, (c) => c.query(`CREATE DATABASE ${name}`));
    return `postgres://postgres@127.0.0.1:${this.port}/${name}`;
  }

  /**
   * True when this machine can run a private server; else says on stderr that
   * `suite` is skipped, or throws under REQUIRE_POSTGRES=1.
   */
  static canRun(suite: string): boolean {
    const found = binaries();
    if (typeof found !== 'string') return true;
    if (process.env.REQUIRE_POSTGRES === '1') throw new Error(`a private PostgreSQL server is required (REQUIRE_POSTGRES=1) for "${suite}", but ${found}`);
    process.stderr.write(`\n  SKIPPED: "${suite}": cannot run a private PostgreSQL server: ${found}\n\n`);
    return false;
  }

  /** A new cluster, started (check `canRun` first); on `firstPort` if it is free. */
  static async create(firstPort?: number): Promise<PrivatePostgres> {
    const found = binaries();
    if (typeof found === 'string') throw new Error(`cannot run a private PostgreSQL server: ${found}`);
    const dir = mkdtempSync(join(tmpdir(), 'engine-private-pg-'));
    if (found.asUser) chownSync(dir, found.asUser.uid, found.asUser.gid);
    const server = new PrivatePostgres(found, dir);
    server.watchdog();
    try {
      await server.pg('initdb', '-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync');
      // A port found free may be taken before the server binds it: then another is tried (ports.ts).
      await onFreePort((port) => {
        server.listensOn = port;
        return server.start();
      }, firstPort);
    } catch (error) {
      await server.remove();
      throw error;
    }
    return server;
  }

  /** A detached shell that stops the server and deletes its folder once this process has gone, unless the folder went first (remove()). */
  private watchdog(): void {
    const [command, argv] = this.command('pg_ctl', '-D', this.dataDir, '-m', 'immediate', '-w', 'stop');
    const stop = [command, ...argv].map((word) => `'${word}'`).join(' ');
    const script = `while kill -0 ${process.pid} 2>/dev/null && [ -d '${this.dir}' ]; do sleep 1; done; if [ -d '${this.dir}' ]; then ${stop}; rm -rf '${this.dir}'; fi`;
    spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
  }

  private get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** Starts the server and resolves once it takes connections. */
  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off`;
    await this.pg('pg_ctl', '-D', this.dataDir, '-l', join(this.dir, 'server.log'), '-o', options, '-w', '-t', String(PG_CTL_WAIT_S), 'start');
    this.running = true;
  }

  /**
   * Stops the server: `fast` ends every session ("terminating connection due to
   * administrator command") and shuts down cleanly; `immediate` is as abrupt as
   * a crash (recovery at the next start).
   */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.pg('pg_ctl', '-D', this.dataDir, '-m', mode, '-w', '-t', String(PG_CTL_WAIT_S), 'stop');
    this.running = false;
  }

  /** The server's log, for a failure's message. */
  log(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Stops the server if it runs (at once) and deletes its folder. */
  async remove(): Promise<void> {
    if (this.running || existsSync(join(this.dataDir, 'postmaster.pid'))) await this.stop('immediate').catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** A command line for one of the server's programs, as the `postgres` OS user when this process is root. */
  private command(tool: string, ...args: string[]): [string, string[]] {
    const program = join(this.tools.bin, tool);
    return this.tools.asUser ? ['runuser', ['-u', OS_USER, '--', program, ...args]] : [program, args];
  }

  /** Runs one of the server's programs. */
  private async pg(tool: string, ...args: string[]): Promise<void> {
    const [command, argv] = this.command(tool, ...args);
    try {
      // From a folder the postgres user can enter (it cannot enter root's working directory on every machine).
      await run(command, argv, { cwd: this.dir, timeout: (PG_CTL_WAIT_S + 10) * 1000 });
    } catch (error) {
      const { stderr, stdout } = error as { stderr?: string; stdout?: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${(stderr || stdout || (error as Error).message).trim()}\n${this.log().slice(-2_000)}`);
    }
  }
}
