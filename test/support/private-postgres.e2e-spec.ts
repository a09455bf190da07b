/** The private PostgreSQL server the restart suite stops and starts (private-postgres.ts). */
import { createServer, type Server } from 'node:net';
import { withPostgresClient } from './databases.js';
import { PrivatePostgres } from './private-postgres.js';

const runnable = PrivatePostgres.canRun('private PostgreSQL server');

function listenAnywhere(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port })));
}

(runnable ? describe : describe.skip)(PrivatePostgres.name, () => {
  it('starts on another port when something takes the one it found first', async () => {
    const taken = await listenAnywhere();
    const postgres = await PrivatePostgres.create(taken.port);
    try {
      expect(postgres.port).not.toBe(taken.port);
      const answer = await withPostgresClient(postgres.url, (c) => c.query<{ port: string }>('SHOW port'));
      expect(Number(answer.rows[0].port)).toBe(postgres.port);
      expect(postgres.log()).toContain('Address already in use');
    } finally {
      await postgres.remove();
      await new Promise<void>((resolve) => taken.server.close(() => resolve()));
    }
  }, 90_000);
});
