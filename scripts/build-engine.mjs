// Bundles the compiled engine (dist/main.js and everything it imports, the
// packages in node_modules included) into one ES module, dist/bundle/main.js,
// which `npm start` runs and the child-process suites test.
//
// Why: Node 20 spends most of the engine's start-up loading modules, about a
// thousand files of node_modules, each resolved, read, and (for CommonJS under
// an ES module) scanned for its exports: some 0.9 s of a 1.6 s start. One file
// loads in a fraction of that (README, Performance: start-up). The code is the
// same: esbuild only joins the files tsc wrote (the decorators' metadata is
// already emitted), keeping class and function names (Nest's logs and error
// messages show them).
//
// Left outside the bundle and loaded from node_modules as before: native
// addons (better-sqlite3 finds its .node file beside its own sources) and the
// optional packages Nest probes for and the engine does not install.
//
// The bundle sits two folders down (dist/bundle/), as the compiled sources do
// (dist/rules/…), so the paths they compute from import.meta.url (the rule
// schema in rules/, the console in dist-console/) point at the same files.
// Stack traces name lines of the bundle; `node --enable-source-maps
// dist/bundle/main.js` maps them back to dist/ through main.js.map.
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Not bundled: native addons, and what Nest and TypeORM only load when installed (they are not). */
const EXTERNAL = [
  'better-sqlite3',
  'pg-native',
  '@nestjs/microservices',
  '@nestjs/microservices/*',
  '@nestjs/websockets',
  '@nestjs/websockets/*',
  '@nestjs/platform-fastify',
  '@fastify/static',
  'class-transformer',
  'class-transformer/*',
  'class-validator',
];

/**
 * CommonJS code inside an ES module still asks for `require`, `__filename`
 * and `__dirname`: give it the bundle's own.
 */
const PRELUDE = [
  "import { createRequire as __engineRequire } from 'node:module';",
  "import { fileURLToPath as __engineFilePath } from 'node:url';",
  "import { dirname as __engineDirname } from 'node:path';",
  'const require = __engineRequire(import.meta.url);',
  'const __filename = __engineFilePath(import.meta.url);',
  'const __dirname = __engineDirname(__filename);',
].join(' ');

/**
 * esbuild keeps names by calling `__name(fn, "name")` each time a function is
 * defined, nested ones included (raw-body defines five per request body,
 * json-rules-engine several per rule evaluated), and each call redefines the
 * function's `name` with `Object.defineProperty`, which V8 does slowly: 2 to
 * 4 % of the engine's CPU under load. Most of those functions already have
 * that name (esbuild renamed only a few to keep the bundle's names apart), so
 * the helper first looks, and leaves those as they are.
 */
const NAME_HELPER = /^var __name = \(target, (\w+)\) => __defProp\(target, "name", \{ value(?:: \1)?, configurable: true \}\);$/m;
const NAME_HELPER_CHECKED = 'var __name = (target, $1) => target.name === $1 ? target : __defProp(target, "name", { value: $1, configurable: true });';

/**
 * The bundle as ASCII. V8 keeps a script's source in memory for as long as the
 * script lives (it compiles functions lazily, from the source), one byte per
 * character when every character is ASCII and two bytes per character
 * otherwise: one `é` in a dependency's comment kept the 7.8 MB bundle as a
 * 15.6 MB string, 8 MB of the engine's resident memory, which the benchmark's
 * 200 MB target counts. esbuild writes strings and names in ASCII
 * (`charset: 'ascii'`) but leaves comments and regular expressions as they
 * are; here each remaining character is written as its `\uXXXX` escape (a
 * character outside the BMP as its two surrogates), which means the same
 * thing in a comment, a string, a template, a regular expression and a name.
 * A backslash right before one would join the escape; none is expected, so
 * it stops the build instead.
 */
export function asciiOnly(text) {
  const escaped = /\\[\u0080-\uffff]/.exec(text);
  if (escaped) throw new Error(`the bundle escapes a non-ASCII character at offset ${escaped.index}: asciiOnly (scripts/build-engine.mjs) cannot rewrite it`);
  return text.replace(/[\u0080-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * @nestjs/typeorm reads two classes TypeORM 1 no longer has (`Connection`,
 * `AbstractRepository`) through a `require('typeorm')` made at run time, so
 * that its types compile against either major version. In the bundle that
 * `require` reaches node_modules: a second TypeORM, some 300 files of it and
 * its dependencies, loaded and compiled at every start (about 200 ms, and
 * its memory), beside the one bundled. Here the module reads them from the
 * bundled TypeORM instead: the same values (`undefined` on TypeORM 1).
 */
const NEST_TYPEORM_COMPAT = /[\\/]@nestjs[\\/]typeorm[\\/]dist[\\/]common[\\/]typeorm-compat\.js$/;
const bundledTypeormCompat = {
  name: 'bundled-typeorm-compat',
  setup(build) {
    build.onLoad({ filter: NEST_TYPEORM_COMPAT }, (args) => ({
      contents: [
        "import * as typeorm from 'typeorm';",
        'const exported = (name) => Object.prototype.hasOwnProperty.call(typeorm, name) ? typeorm[name] : undefined;',
        "export const Connection = exported('Connection');",
        "export const AbstractRepository = exported('AbstractRepository');",
      ].join('\n'),
      loader: 'js',
      // Resolved from where @nestjs/typeorm's own `typeorm` would be: the TypeORM the rest of the bundle has.
      resolveDir: dirname(args.path),
    }));
  },
};

/** `entry` (a compiled main.js) and what it imports → `outfile`, one ES module. */
export async function buildEngineBundle(entry, outfile) {
  const { build } = await import('esbuild');
  const { outputFiles } = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    keepNames: true,
    sourcemap: 'linked',
    legalComments: 'none',
    charset: 'ascii',
    logLevel: 'warning',
    external: EXTERNAL,
    plugins: [bundledTypeormCompat],
    banner: { js: PRELUDE },
    write: false,
  });
  mkdirSync(dirname(outfile), { recursive: true });
  for (const file of outputFiles) {
    if (file.path.endsWith('.map')) {
      writeFileSync(file.path, file.contents);
      continue;
    }
    // The helper is one line, so the source map (which counts lines) stays true.
    if (!NAME_HELPER.test(file.text)) throw new Error(`esbuild's __name helper is not as ${fileURLToPath(import.meta.url)} expects it: update NAME_HELPER`);
    writeFileSync(file.path, asciiOnly(file.text.replace(NAME_HELPER, NAME_HELPER_CHECKED)));
  }
}

export const RULE_SCHEMA = join(ROOT, 'rules', 'rule.schema.json');
export const RULE_VALIDATORS = join(ROOT, 'dist', 'rule-validators.cjs');

/**
 * The rule validators compiled to code (src/rules/rule-validators-source.ts,
 * as tsc wrote it beside `entry`), which the engine loads instead of
 * compiling the rule schema at every start (src/rules/rule-schema.ts; it
 * still compiles the schema itself when this file is missing or was made
 * from another schema).
 */
export async function buildRuleValidators(entry, outfile = RULE_VALIDATORS) {
  const { ruleValidatorsSource } = await import(pathToFileURL(join(dirname(entry), 'rules', 'rule-validators-source.js')).href);
  writeFileSync(outfile, ruleValidatorsSource(readFileSync(RULE_SCHEMA, 'utf8')));
}

/**
 * True when `outfile` or the rule validators are missing or older than
 * `entry` (tsc rewrites every file it compiles), than the rule schema or
 * than this script.
 */
export function engineBundleNeeded(entry, outfile) {
  const made = Math.max(statSync(entry).mtimeMs, statSync(RULE_SCHEMA).mtimeMs, statSync(fileURLToPath(import.meta.url)).mtimeMs);
  return [outfile, RULE_VALIDATORS].some((file) => !existsSync(file) || statSync(file).mtimeMs < made);
}

export const ENGINE_ENTRY = join(ROOT, 'dist', 'main.js');
export const ENGINE_BUNDLE = join(ROOT, 'dist', 'bundle', 'main.js');

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--if-needed') && !engineBundleNeeded(ENGINE_ENTRY, ENGINE_BUNDLE)) process.exit(0);
  process.stderr.write(`bundling ${dirname(ENGINE_BUNDLE).slice(ROOT.length)}/main.js …\n`);
  await buildEngineBundle(ENGINE_ENTRY, ENGINE_BUNDLE);
  await buildRuleValidators(ENGINE_ENTRY);
}
