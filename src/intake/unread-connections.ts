/**
 * The connections the HTTP server has accepted whose first request it has not
 * read yet: each is, almost always, a webhook already sent, by a sender that
 * opens a connection per webhook. SQLite's intake commit, which blocks the
 * event loop while it syncs, waits a turn of the loop for them
 * (event-writer.ts); the webhook route keeps the count (webhook-route.ts).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const unread = new Set<Socket>();

/** Counts `server`'s connections from their acceptance until their first request or their close. */
export function countUnreadConnections(server: Server): void {
  server.on('connection', (socket: Socket) => {
    unread.add(socket);
    socket.once('close', () => unread.delete(socket));
  });
  server.on('request', (req: { socket: Socket }) => unread.delete(req.socket));
}

/** Whether connections have been accepted whose first request is not read yet. */
export function requestsOnTheirWay(): boolean {
  return unread.size > 0;
}
