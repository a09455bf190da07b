/**
 * The parts of Node-RED's runtime the benchmark's flow engine uses (bench/flow-engine.ts), as the `node-red` package
 * embeds them (its lib/red.js); the packages ship no types.
 */
declare module '@node-red/util' {
  const util: {
    /** Logging and messages; before the runtime's `init`. */
    init(settings: object): void;
  };
  export default util;
}

declare module '@node-red/runtime' {
  import type { RequestListener, Server } from 'node:http';

  const runtime: {
    init(settings: object, server: Server): void;
    /** Loads the core nodes from `settings.coreNodesDir` and starts the flows of `settings.flowFile`. */
    start(): Promise<void>;
    stop(): Promise<void>;
    /** The Express app the flows' `http in` nodes add their routes to. */
    readonly httpNode: RequestListener;
  };
  export default runtime;
}
