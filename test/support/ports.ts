/**
 * A free port is only free until someone takes it: `freePort` finds one and
 * lets it go, and another process (a test of another jest worker, a server
 * listening on port 0) may take it before the engine listens on it. An engine
 * started on a port found that way is started again on another one when it
 * exits with EADDRINUSE.
 */
import { createServer } from 'node:net';

const TRIES = 4;

/** A port nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** How a start says its port was taken: Node's code, or the words of a server that says it in its own (PostgreSQL). */
const PORT_TAKEN = /EADDRINUSE|Address already in use/;

/** Starts on a free port (`first`, if given, for the first try), and on another while the one tried was taken. */
export async function onFreePort<T>(start: (port: number) => Promise<T>, first?: number): Promise<{ started: T; port: number }> {
  for (let tries = 1; ; tries++) {
    const port = tries === 1 && first !== undefined ? first : await freePort();
    try {
      return { started: await start(port), port };
    } catch (error) {
      if (tries >= TRIES || !PORT_TAKEN.test(String((error as Error)?.message))) throw error;
    }
  }
}
