/**
 * The bundle `npm start` runs (scripts/build-engine.mjs): it keeps the names
 * of functions and classes as esbuild's keepNames does, with a helper that
 * leaves alone a function that already has its name, built from a small
 * program whose two modules each define `helper` and `Store`, so that esbuild
 * renames one of each; and the engine's own bundle loads from node_modules
 * only what is left out of it on purpose (docs/performance-log.md, session 12).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const MODULE = (tag: string) => `
export function helper() { return '${tag}'; }
export class Store {}
export function nested() { function inner() {} return inner; }
`;

const MAIN = `
import * as a from './a.mjs';
import * as b from './b.mjs';
const names = [a.helper.name, b.helper.name, a.Store.name, b.Store.name, a.nested().name, b.nested().name, new b.Store().constructor.name];
process.stdout.write(JSON.stringify({ names, calls: [a.helper(), b.helper()] }));
`;

describe('the engine bundle', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'engine-bundle-'));
    writeFileSync(join(dir, 'a.mjs'), MODULE('a'));
    writeFileSync(join(dir, 'b.mjs'), MODULE('b'));
    writeFileSync(join(dir, 'main.mjs'), MAIN);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps every name, renamed ones included, and checks a name before redefining it', async () => {
    const { buildEngineBundle } = (await import('../scripts/build-engine.mjs' as string)) as { buildEngineBundle(entry: string, outfile: string): Promise<void> };
    const outfile = join(dir, 'bundle', 'main.mjs');
    // Given relative paths, as bench/ensure-build.mjs gives them (esbuild answers with absolute ones).
    await buildEngineBundle(relative(process.cwd(), join(dir, 'main.mjs')), relative(process.cwd(), outfile));
    const text = readFileSync(outfile, 'utf8');
    // esbuild renamed one of each pair apart (helper2, Store2) and names them back through the helper.
    expect(text).toMatch(/function helper2\(/);
    expect(text).toMatch(/var __name = \(target, (\w+)\) => target\.name === \1 \? target : __defProp/);
    const run = JSON.parse(execFileSync(process.execPath, [outfile], { encoding: 'utf8' })) as { names: string[]; calls: string[] };
    expect(run.names).toEqual(['helper', 'helper', 'Store', 'Store', 'inner', 'inner', 'Store']);
    expect(run.calls).toEqual(['a', 'b']);
  });

  it('is written in ASCII (V8 keeps a source with any other character at two bytes a character), with the same meaning', async () => {
    const { buildEngineBundle } = (await import('../scripts/build-engine.mjs' as string)) as { buildEngineBundle(entry: string, outfile: string): Promise<void> };
    // Non-ASCII characters where esbuild leaves them as they are (a comment, regular expressions) and where it escapes them itself.
    writeFileSync(join(dir, 'text.mjs'), `
      // Déjà vu — a comment esbuild keeps.
      const plain = (s) => s.replace(/[àáâ]/g, 'a').replace(/é/g, 'e');
      const smile = /😀/u;
      const café = 'crème brûlée 😀';
      process.stdout.write(JSON.stringify({ plain: plain('àé'), smile: smile.test(café), text: café, length: café.length }));
    `);
    const outfile = join(dir, 'text-bundle', 'main.mjs');
    await buildEngineBundle(join(dir, 'text.mjs'), outfile);
    expect(readFileSync(outfile, 'utf8')).not.toMatch(/[\u0080-\uffff]/);
    expect(JSON.parse(execFileSync(process.execPath, [outfile], { encoding: 'utf8' }))).toEqual({ plain: 'ae', smile: true, text: 'crème brûlée 😀', length: 15 });
    const bundle = 'dist/bundle/main.js';
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` first (npm test does)`);
    expect(readFileSync(bundle, 'latin1')).not.toMatch(/[\u0080-\uffff]/);
  });

  it('comes with the rule validators compiled to code for the rule schema as it is, so that no start compiles the schema', async () => {
    const { precompiledValidators, readRuleSchemaText, PRECOMPILED_VALIDATORS_PATH } = await import('../src/rules/rule-schema.js');
    if (!existsSync(PRECOMPILED_VALIDATORS_PATH)) throw new Error(`${PRECOMPILED_VALIDATORS_PATH} is missing: run \`npm run build\` first (npm test does)`);
    const validators = precompiledValidators(readRuleSchemaText());
    expect(validators).toBeDefined();
    expect(validators!.rule({ id: 'x', on: 'task.completed', actions: [] })).toBe(false);
    expect(validators!.rule.errors?.map((error) => error.message)).toEqual(['must NOT have fewer than 1 items']);
  });

  it('the engine, loaded, takes nothing from node_modules (no second TypeORM; the native addon loads when the database opens)', () => {
    const bundle = 'dist/bundle/main.js';
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` first (npm test does)`);
    // Records every CommonJS file compiled, then lets the engine refuse a bad PORT: by then every module is loaded.
    const hook = join(dir, 'loaded.cjs');
    const loaded = join(dir, 'loaded.json');
    writeFileSync(hook, `
      const Module = require('node:module'); const compile = Module.prototype._compile; const files = [];
      Module.prototype._compile = function (content, filename) { files.push(filename); return compile.call(this, content, filename); };
      process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify(files)));`);
    const run = spawnSync(process.execPath, ['-r', hook, bundle], { env: { ...process.env, PORT: 'not-a-port' }, encoding: 'utf8' });
    expect(run.stderr).toContain('configuration error: PORT');
    const packages = new Set((JSON.parse(readFileSync(loaded, 'utf8')) as string[]).map((file) => /node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+)/.exec(file)?.[1] ?? file));
    expect([...packages]).toEqual([]);
  });
});
