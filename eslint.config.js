// `npm run lint`: typescript-eslint's recommended rules, the size limits of the
// house style, no import cycles, and the direction of imports between the
// folders of src/ (`layers` below), which is the architecture the folder names
// promise. Nothing here needs type information, so the whole run stays fast.
import { join } from 'node:path';
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import boundaries from 'eslint-plugin-boundaries';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * What each folder of src/ may import besides itself and the shared files
 * (src/json.ts, clock.ts, errors.ts, version.ts, wait.ts). Anything not listed is
 * refused, type-only imports included: a type import still ties one folder's
 * design to another's.
 */
const layers = {
  processing: ['actions', 'rules', 'intake', 'observability', 'http', 'config', 'database'],
  actions: ['rules', 'observability', 'http', 'config', 'database'],
  intake: ['observability', 'http', 'config', 'database'],
  rules: ['observability', 'config', 'database'],
  observability: ['config'],
  http: ['config'],
  database: ['config'],
  config: [],
  // The stand-in service is an entry point of its own: it shares the
  // envelope and signature code with intake, and nothing of the engine.
  simulator: ['intake', 'config'],
};
/**
 * Entry points in src/. They, the engine's composition files (main, app,
 * app.module) and the benchmark (bench/, beside src/: a development tool that
 * is not shipped) may import every layer and one another. Nothing else may
 * import them, except the tests.
 */
const entryFolders = ['admin', 'cli', 'demo', 'console'];
/** Entry points that may also start the stand-in service. */
const simulatorUsers = ['cli', 'demo', 'bench'];
/** Where the import rules look: the program, its tests and the benchmark. */
const checkedFiles = ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'];

const element = (type) => ({ element: { type } });
/** Files at the top of src/: the engine's composition (main, app, app.module) and the shared files. */
const rootFile = (category) => ({ element: { type: 'src-root' }, file: { categories: category } });
const shared = rootFile('shared');
const entryFiles = rootFile('entry');
const everyLayer = Object.keys(layers).filter((type) => type !== 'simulator').map(element);
const everyEntry = [...entryFolders.map(element), element('bench'), entryFiles];
const testSupport = { file: { categories: 'test-support' } };

const dependencyPolicies = [
  ...Object.entries(layers).map(([type, below]) => ({
    from: element(type),
    allow: { to: [element(type), ...below.map(element), shared] },
  })),
  { from: shared, allow: { to: shared } },
  ...everyEntry.map((from) => ({ from, allow: { to: [...everyEntry, ...everyLayer, shared] } })),
  ...simulatorUsers.map((type) => ({ from: element(type), allow: { to: element('simulator') } })),
  // Unit specs sit beside the code they test and may use the test helpers; so may the
  // benchmark, which is not shipped and measures the engine on the tests' databases.
  { from: [{ file: { categories: 'spec' } }, element('bench')], allow: { to: testSupport } },
  // A shared file's spec sits beside it, at the top of src/.
  { from: rootFile('spec'), allow: { to: shared } },
  // A spec that needs the service talks to the stand-in over real HTTP, never to a mock of it.
  { from: { file: { categories: 'spec' } }, allow: { to: element('simulator') } },
  // The end-to-end suites and their helpers drive the whole program.
  { from: element('test'), allow: { to: [element('test'), element('simulator'), ...everyEntry, ...everyLayer, shared] } },
];

// Imports name the compiled file (`./facts.js`); the TypeScript resolver finds `facts.ts`.
const tsconfig = join(import.meta.dirname, 'tsconfig.json');

const boundariesConfig = {
  files: checkedFiles,
  plugins: { boundaries },
  settings: {
    'boundaries/root-path': import.meta.dirname,
    // Folders, matched from the project root; the first that matches names the file's element.
    // A file directly in src/ is 'src-root', and its category below says what it may import:
    // one in no category (a new file, a new folder) may import nothing until it is given a place.
    'boundaries/elements': [
      ...[...Object.keys(layers), ...entryFolders].map((type) => ({ type, pattern: `src/${type}`, partialMatch: false })),
      { type: 'bench', pattern: 'bench', partialMatch: false },
      { type: 'test', pattern: 'test', partialMatch: false },
      { type: 'src-root', pattern: 'src', partialMatch: false },
    ],
    'boundaries/files': [
      { category: 'entry', pattern: 'src/{main,app,app.module}.ts' },
      { category: 'shared', pattern: 'src/{json,clock,errors,version,wait,causal-scope}.ts' },
      { category: 'spec', pattern: 'src/**/*.spec.ts' },
      { category: 'test-support', pattern: 'test/support/**' },
    ],
    // Re-exports and import() tie files together as much as import statements do.
    'boundaries/dependency-nodes': ['import', 'export', 'dynamic-import'],
    'import/resolver': { typescript: { project: tsconfig } },
  },
  rules: {
    // checkInternals: a shared file importing main.ts is in the same folder, and still wrong.
    'boundaries/dependencies': ['error', { default: 'disallow', checkInternals: true, policies: dependencyPolicies }],
    // A local import the resolver cannot place in a folder would pass the rule above unseen.
    'boundaries/no-unknown-dependencies': 'error',
  },
};

export default defineConfig([
  globalIgnores(['dist/', 'dist-check/', 'dist-bench/', 'dist-console/', 'node_modules/', 'coverage/', 'data/', 'bench/results/', '.rt-dist/']),
  {
    files: ['**/*.{js,mjs}'],
    extends: [js.configs.recommended],
    languageOptions: { globals: globals.node },
  },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    rules: {
      // A `_` prefix is how this code marks a name left unused on purpose:
      // `const { id: _id, ...rest } = params` drops one field from a copy.
      '@typescript-eslint/no-unused-vars': ['error', { varsIgnorePattern: '^_', argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.spec.ts', 'test/**/*.ts'],
    rules: {
      // The command-line specs assert the exact terminal colour codes, escape character included.
      'no-control-regex': 'off',
    },
  },
  {
    files: checkedFiles,
    plugins: { 'import-x': importX },
    settings: {
      // Without '.ts' here the rule never follows an import into a TypeScript file, and finds no cycle.
      'import-x/extensions': ['.ts'],
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: tsconfig })],
    },
    rules: {
      // A cycle of value imports makes module start-up order matter; type-only imports are not counted.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
    },
  },
  boundariesConfig,
  {
    // The console's front end (console/, built into dist-console/): browser code,
    // with the same recommended rules, no import cycles and the file size limit.
    // Its components are markup, so the 40-line limit for functions is not applied.
    files: ['console/**/*.{ts,tsx}'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    languageOptions: { globals: globals.browser },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.tsx'],
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: join(import.meta.dirname, 'console', 'tsconfig.json') })],
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { varsIgnorePattern: '^_', argsIgnorePattern: '^_' }],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // The house style's size limits, for the program itself (tests may tell longer stories).
    files: ['src/**/*.ts', 'bench/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: {
      'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 40, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
]);
