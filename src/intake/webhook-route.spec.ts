/**
 * The webhook route counts the connections accepted whose first request has
 * not been read yet (`requestsOnTheirWay`), which SQLite's intake commit waits
 * a turn for. Real sockets to a real node:http server.
 */
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { waitUntil } from '../wait.js';
import type { IntakeService } from './intake.service.js';
import { requestsOnTheirWay, serveWebhooksFirst } from './webhook-route.js';

describe(requestsOnTheirWay.name, () => {
  let server: Server;
  const sockets: Socket[] = [];
  beforeEach(async () => {
    server = createServer();
    // Only requests other than webhooks are sent here: the intake is never asked.
    serveWebhooksFirst(server, {} as IntakeService, 1024);
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

  it('says yes from a connection accepted until its first request is read, and no after', async () => {
    expect(requestsOnTheirWay()).toBe(false);
    const socket = open();
    await waitUntil(async () => requestsOnTheirWay(), { timeoutMs: 5_000, intervalMs: 5, what: 'the connection to be accepted' });
    socket.write('GET /anything HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitUntil(async () => !requestsOnTheirWay(), { timeoutMs: 5_000, intervalMs: 5, what: 'the request to be read' });
  });

  it('says no once a connection that sent nothing is closed', async () => {
    const socket = open();
    await waitUntil(async () => requestsOnTheirWay(), { timeoutMs: 5_000, intervalMs: 5, what: 'the connection to be accepted' });
    socket.destroy();
    await waitUntil(async () => !requestsOnTheirWay(), { timeoutMs: 5_000, intervalMs: 5, what: 'the closed connection to be let go' });
  });
});
