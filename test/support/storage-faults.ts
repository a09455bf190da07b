/**
 * Storage faults made for real, for the suites that check how the engine
 * survives them:
 *
 * - SQLite: the engine's file on a small tmpfs the test mounts, fills (by
 *   sending events) and grows again, or remounts read-only. Mounting needs root
 *   (CI runs as root); elsewhere the suites say plainly that they skipped, and
 *   REQUIRE_STORAGE_FAULTS=1 turns that into a failure. Note that a tmpfs cannot
 *   be remounted read-only while a file on it is open for writing (EBUSY), and
 *   that root ignores file modes: the read-only file at start is made with
 *   `chattr +i` (immutable), which stops root too.
 * - SQLite, the file system failing under a running engine: an ext4 image on
 *   a loop device, mounted with errors=remount-ro, which ext4's own test knob
 *   (/sys/fs/ext4/<device>/trigger_fs_error) makes the kernel treat as failed:
 *   it turns the file system read-only, as after a real disk error, and every
 *   write on it fails with EIO (SQLITE_IOERR). Repairing it takes what an
 *   operator does: unmount (lazily: the engine still has its file open), check
 *   with e2fsck once nothing holds it, mount again.
 * - PostgreSQL: the server refuses writes to the engine's database
 *   (`default_transaction_read_only`, with the engine's sessions terminated so
 *   new ones pick it up), then takes them again; the engine's sessions are not
 *   terminated a second time, so the engine has to let go of the refusing ones
 *   itself.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { postgresUrlForTests, withPostgresClient } from './databases.js';

const run = promisify(execFile);

/** Runs a system command; its stderr in the error when it fails. */
export async function sh(command: string, ...args: string[]): Promise<string> {
  try {
    return (await run(command, args)).stdout;
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr?.trim() || (error as Error).message}`);
  }
}

let mountCheck: Promise<string | undefined> | undefined;

/** Undefined when this process may mount a tmpfs, else why not. */
function whyMountingFails(): Promise<string | undefined> {
  mountCheck ??= (async () => {
    if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root, and the tests do not run as root';
    const dir = mkdtempSync(join(tmpdir(), 'mount-check-'));
    try {
      await sh('mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir);
      await sh('umount', dir);
      return undefined;
    } catch (error) {
      return (error as Error).message;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();
  return mountCheck;
}

/** True when the SQLite side of a storage-fault suite can run; else says plainly that it is skipped (or fails, with REQUIRE_STORAGE_FAULTS=1). */
export async function canMakeDiskFaults(suite: string): Promise<boolean> {
  const why = await whyMountingFails();
  if (why === undefined) return true;
  if (process.env.REQUIRE_STORAGE_FAULTS === '1') throw new Error(`storage faults are required (REQUIRE_STORAGE_FAULTS=1) but ${why}`);
  process.stderr.write(`\n  SKIPPED: "${suite}" on SQLite: ${why}\n\n`);
  return false;
}

/** A tmpfs of its own, holding one engine database file. */
export class SmallDisk {
  private mounted = true;

  private constructor(readonly dir: string) {}

  static async mount(size: string): Promise<SmallDisk> {
    const dir = mkdtempSync(join(tmpdir(), 'engine-small-disk-'));
    await sh('mount', '-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir);
    return new SmallDisk(dir);
  }

  get file(): string {
    return join(this.dir, 'engine.sqlite');
  }

  get url(): string {
    return `sqlite:${this.file}`;
  }

  /** Changes the size; a tmpfs grows (or shrinks to what it holds) in place, files open or not. */
  resize(size: string): Promise<string> {
    return sh('mount', '-o', `remount,size=${size}`, this.dir);
  }

  /** Read-only or writable again; read-only only while no file on it is open for writing. */
  remount(mode: 'ro' | 'rw'): Promise<string> {
    return sh('mount', '-o', `remount,${mode}`, this.dir);
  }

  /** Makes the database file immutable (root cannot write it either) or ordinary again. */
  immutable(on: boolean): Promise<string> {
    return sh('chattr', on ? '+i' : '-i', this.file);
  }

  /** Unmounts (lazily when something still holds a file open) and removes the mount point. Safe to call twice. */
  async unmount(): Promise<void> {
    if (!this.mounted) return;
    this.mounted = false;
    await sh('chattr', '-i', this.file).catch(() => undefined);
    await sh('mount', '-o', 'remount,rw', this.dir).catch(() => undefined);
    await sh('umount', this.dir).catch(() => sh('umount', '-l', this.dir));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let loopCheck: Promise<string | undefined> | undefined;

/** True when the file system can be made to fail here (root, loop devices, ext4); else says plainly that it is skipped (or fails, with REQUIRE_STORAGE_FAULTS=1). */
export async function canMakeIoErrors(suite: string): Promise<boolean> {
  loopCheck ??= (async () => {
    const why = await whyMountingFails();
    if (why !== undefined) return why;
    try {
      const disk = await FailingDisk.mount();
      await disk.dispose();
      if (!existsSync('/sys/fs/ext4')) return 'the kernel has no /sys/fs/ext4 to make an ext4 file system fail';
      return undefined;
    } catch (error) {
      return `no ext4 file system on a loop device can be made here (${(error as Error).message})`;
    }
  })();
  const why = await loopCheck;
  if (why === undefined) return true;
  if (process.env.REQUIRE_STORAGE_FAULTS === '1') throw new Error(`storage faults are required (REQUIRE_STORAGE_FAULTS=1) but ${why}`);
  process.stderr.write(`\n  SKIPPED: "${suite}" on SQLite: ${why}\n\n`);
  return false;
}

/** An ext4 file system of its own, on a loop device over an image file, that the test can make fail and repair. */
export class FailingDisk {
  private mounted = true;

  private constructor(
    private readonly home: string,
    readonly device: string,
  ) {}

  static async mount(size = '64M'): Promise<FailingDisk> {
    const home = mkdtempSync(join(tmpdir(), 'engine-failing-disk-'));
    const image = join(home, 'disk.img');
    await sh('truncate', '-s', size, image);
    await sh('mkfs.ext4', '-q', '-F', image);
    const device = (await sh('losetup', '--find', '--show', image)).trim();
    const disk = new FailingDisk(home, device);
    try {
      await sh('mkdir', '-p', disk.dir);
      await sh('mount', '-o', 'errors=remount-ro', device, disk.dir);
    } catch (error) {
      disk.mounted = false;
      await disk.dispose();
      throw error;
    }
    return disk;
  }

  get dir(): string {
    return join(this.home, 'mnt');
  }

  get url(): string {
    return `sqlite:${join(this.dir, 'engine.sqlite')}`;
  }

  /** The kernel takes the file system for failed: read-only from now on, every write EIO. */
  fail(): void {
    writeFileSync(`/sys/fs/ext4/${this.device.replace('/dev/', '')}/trigger_fs_error`, 'storage fault test');
  }

  /**
   * What an operator does: unmount (lazily, since the engine still holds its
   * file), wait until nothing holds the file system and e2fsck can check it,
   * mount it again. Resolves with how long e2fsck had to wait.
   */
  async repair(timeoutMs = 15_000): Promise<number> {
    await sh('umount', '-l', this.dir);
    this.mounted = false;
    const started = Date.now();
    for (;;) {
      // 0: clean, 1: errors corrected; 8: it could not open the device (still held).
      const exit = await run('e2fsck', ['-fy', this.device]).then(() => 0, (error: { code?: number }) => error.code ?? 8);
      if (exit <= 1) break;
      if (Date.now() - started > timeoutMs) throw new Error(`e2fsck could not check ${this.device} within ${timeoutMs} ms (exit ${exit}): something still holds it`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const waited = Date.now() - started;
    await sh('mount', '-o', 'errors=remount-ro', this.device, this.dir);
    this.mounted = true;
    return waited;
  }

  /** Unmounts (lazily if need be), detaches the loop device and removes the image. Safe to call twice. */
  async dispose(): Promise<void> {
    if (this.mounted) await sh('umount', this.dir).catch(() => sh('umount', '-l', this.dir));
    this.mounted = false;
    await sh('losetup', '-d', this.device).catch(() => undefined);
    rmSync(this.home, { recursive: true, force: true });
  }
}

/** The database name in a PostgreSQL URL. */
function databaseOf(url: string): string {
  return new URL(url).pathname.slice(1);
}

/** Run from the server's own database: a session on the refusing one could not undo it. */
function onServer(sql: string, params: unknown[] = []): Promise<unknown> {
  return withPostgresClient(postgresUrlForTests, (c) => c.query(sql, params));
}

/** Ends every session on the database but this test's own. */
export function terminateSessions(url: string): Promise<unknown> {
  return onServer('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [databaseOf(url)]);
}

/** The database refuses writes from every new session; the open ones are terminated, so that goes for all of them. */
export async function refuseWrites(url: string): Promise<void> {
  await onServer(`ALTER DATABASE ${databaseOf(url)} SET default_transaction_read_only = on`);
  await terminateSessions(url);
}

/** New sessions may write again; sessions already open keep refusing (the engine must replace them). */
export async function takeWrites(url: string): Promise<void> {
  await onServer(`ALTER DATABASE ${databaseOf(url)} RESET default_transaction_read_only`);
}
