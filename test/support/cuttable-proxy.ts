/**
 * A TCP proxy in front of PostgreSQL that a test can cut: while cut, it closes
 * the connections it carries and every new one at once (counting those), so a
 * client's attempts to reconnect can be seen; restored, it carries them again.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface CuttableProxy {
  port: number;
  /** When each connection attempt made while cut arrived (performance.now()). */
  attemptsWhileDown: number[];
  /** `url` (a PostgreSQL URL) through this proxy. */
  through(url: string): string;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function cuttableProxy(targetUrl: string): Promise<CuttableProxy> {
  const target = new URL(targetUrl);
  const open = new Set<Socket>();
  const attemptsWhileDown: number[] = [];
  let down = false;
  const server = createServer((socket) => {
    if (down) {
      attemptsWhileDown.push(performance.now());
      socket.destroy();
      return;
    }
    const upstream = connect(Number(target.port || 5432), target.hostname);
    open.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    const drop = () => {
      for (const end of [socket, upstream]) {
        end.destroy();
        open.delete(end);
      }
    };
    socket.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const cutAll = () => {
    for (const socket of open) socket.destroy();
  };
  return {
    port,
    attemptsWhileDown,
    through(url) {
      const via = new URL(url);
      via.host = `127.0.0.1:${port}`;
      return via.toString();
    },
    cut() {
      down = true;
      cutAll();
    },
    restore() {
      down = false;
    },
    close() {
      cutAll();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
