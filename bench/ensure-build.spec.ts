/**
 * bench/ensure-build.mjs's lock: two builds started at once take turns, and a lock a killed build left behind is
 * taken over once stale. Run in a folder of its own laid out as the repository is, with `dist-bench/` already current
 * (so no compiler runs) and a stand-in for scripts/build-engine.mjs that notes each time a build reaches it.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from '../src/wait.js';

describe('bench/ensure-build.mjs, built twice at once', () => {
  let root: string;
  const reached = () => (existsSync(join(root, 'reached')) ? readFileSync(join(root, 'reached'), 'utf8').length : 0);
  const lock = () => join(root, 'dist-bench.lock');

  function build(): Promise<number | null> {
    const child = spawn(process.execPath, [join(root, 'bench', 'ensure-build.mjs')], { cwd: root, stdio: 'ignore' });
    return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'ensure-build-'));
    for (const folder of ['bench', 'src', 'test/support', 'scripts', 'rules', 'dist-bench/bench']) mkdirSync(join(root, folder), { recursive: true });
    copyFileSync('bench/ensure-build.mjs', join(root, 'bench', 'ensure-build.mjs'));
    for (const source of ['src/main.ts', 'test/support/x.ts', 'tsconfig.json', 'rules/rule.schema.json']) writeFileSync(join(root, source), '{}');
    const past = new Date(Date.now() - 3_600_000);
    for (const source of ['bench', 'src', 'src/main.ts', 'test/support', 'test/support/x.ts', 'tsconfig.json']) utimesSync(join(root, source), past, past);
    utimesSync(join(root, 'bench', 'ensure-build.mjs'), past, past);
    writeFileSync(join(root, 'dist-bench', 'bench', 'bench.js'), '');
    // Each build that gets past the lock's first part appends a mark, and bundles nothing.
    writeFileSync(join(root, 'scripts', 'build-engine.mjs'),
      "import { appendFileSync } from 'node:fs';\nappendFileSync('reached', 'x');\nexport const engineBundleNeeded = () => false;\nexport const buildEngineBundle = async () => {};\n");
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('waits while another build holds the lock, then builds and lets it go', async () => {
    mkdirSync(lock());
    const done = build();
    // Held by "another build": this one does not get past it (it would within milliseconds).
    await expect(waitUntil(() => reached() > 0, { timeoutMs: 1_500, intervalMs: 50 })).rejects.toThrow();
    rmSync(lock(), { recursive: true });

    expect(await done).toBe(0);
    expect(reached()).toBe(1);
    expect(existsSync(lock())).toBe(false);
    expect(existsSync(join(root, 'dist-bench', 'rules', 'rule.schema.json'))).toBe(true);
  });

  it('lets two builds at once through one after the other', async () => {
    expect(await Promise.all([build(), build()])).toEqual([0, 0]);
    expect(reached()).toBe(2);
    expect(existsSync(lock())).toBe(false);
  });

  it('takes over a lock left more than ten minutes ago by a build that was killed', async () => {
    mkdirSync(lock());
    const stale = new Date(Date.now() - 11 * 60_000);
    utimesSync(lock(), stale, stale);

    expect(await build()).toBe(0);
    expect(reached()).toBe(1);
    expect(existsSync(lock())).toBe(false);
  });
});
