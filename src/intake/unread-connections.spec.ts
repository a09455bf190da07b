/**
 * The connections accepted whose first request has not been read yet
 * (unread-connections.ts), which SQLite's intake commit waits a turn for.
 * Real sockets to a real node:http server.
 */
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { waitUntil } from '../wait.js';
import { countUnreadConnections, requestsOnTheirWay } from './unread-connections.js';

describe(requestsOnTheirWay.name, () => {
  let server: Server;
  const sockets: Socket[] = [];
  beforeEach(async () => {
    server = createServer((_req, res) => res.end('ok'));
    countUnreadConnections(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const open = () => {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    sockets.push(socket);
    return socket;
  };
  const until = (probe: () => boolean, what: string) => waitUntil(async () => probe(), { timeoutMs: 5_000, intervalMs: 5, what });

  it('says yes from a connection accepted until its first request is read, and no after', async () => {
    expect(requestsOnTheirWay()).toBe(false);
    const socket = open();
    await until(() => requestsOnTheirWay(), 'the connection to be accepted');
    socket.write('GET /anything HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => !requestsOnTheirWay(), 'the request to be read');
  });

  it('says no once a connection that sent nothing is closed', async () => {
    const socket = open();
    await until(() => requestsOnTheirWay(), 'the connection to be accepted');
    socket.destroy();
    await until(() => !requestsOnTheirWay(), 'the closed connection to be let go');
  });
});
