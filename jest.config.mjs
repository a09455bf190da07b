/** Unit specs sit beside the code; end-to-end suites live in test/. Both run as native ESM. */
const tsJest = ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }];
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': tsJest },
  testEnvironment: 'node',
};
export default {
  maxWorkers: 2,
  // End-to-end tests wait on real servers; a unit test never comes near this.
  testTimeout: 60_000,
  forceExit: true,
  // A worker ends its share of the suites holding 0.5-1.2 GB (jest keeps each ESM test file's modules), and its
  // process takes 0.5-0.65 s to be gone once told to end (its memory freed): past jest's default of 500 ms, which
  // then says a worker "failed to exit gracefully" though nothing in it was left open (measured in session 79: no
  // handle, no timer). A worker that does hang is still killed, 5 s after the run.
  workerGracefulExitTimeout: 5_000,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/bench/**/*.spec.ts'] },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      // Fails any end-to-end file in which a known secret shows up in an answer or an engine's log.
      setupFilesAfterEnv: ['<rootDir>/test/support/secret-watch.ts'],
    },
  ],
};
