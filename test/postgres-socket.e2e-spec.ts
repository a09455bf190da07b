/**
 * PostgreSQL on the engine's own host, reached through its Unix-domain socket
 * (README, Configuration: DATABASE_URL with the socket's folder as its host,
 * `postgres://user@%2Fvar%2Frun%2Fpostgresql/db`). The engine takes it like any
 * other PostgreSQL URL: an event is acted on end to end, and every session the
 * engine opens is a socket's (pg_stat_activity shows no client address).
 */
import { existsSync } from 'node:fs';
import { createPostgresDatabase, databasesUnderTest, withPostgresClient, type TestDatabase } from './support/databases.js';
import { rulesDir } from './support/engine.js';
import { createTaskAsAPerson, quiescence, startRoundTrip, tasksCreatedByEngine, type RoundTrip } from './support/round-trip.js';
import { waitUntil } from './support/wait.js';

const SOCKET_FOLDER = '/var/run/postgresql';
const onPostgres = (await databasesUnderTest('PostgreSQL through its socket')).some((kind) => kind.name === 'postgres');
const socketHere = existsSync(`${SOCKET_FOLDER}/.s.PGSQL.5432`);
if (onPostgres && !socketHere) process.stderr.write(`\n  SKIPPED: "PostgreSQL through its socket": no socket in ${SOCKET_FOLDER}\n\n`);

(onPostgres && socketHere ? describe : describe.skip)('PostgreSQL through its Unix-domain socket', () => {
  let db: TestDatabase;
  let both: RoundTrip | undefined;

  beforeEach(async () => {
    db = await createPostgresDatabase();
  });
  afterEach(async () => {
    await both?.stop();
    both = undefined;
    await db.drop();
  });

  it('acts on an event end to end, with every session of the engine on the socket', async () => {
    const name = new URL(db.url).pathname.slice(1);
    const overSocket = `postgres://postgres@${encodeURIComponent(SOCKET_FOLDER)}/${name}`;
    const rule = {
      id: 'follow-up',
      on: 'task.created',
      conditions: { all: [{ fact: 'event', path: '$.data.task.title', operator: 'equal', value: 'Plan' }] },
      actions: [{ type: 'task.create', params: { project_id: '{{ event.data.task.project_id }}', title: 'Follow-up: {{ event.data.task.title }}' } }],
    };
    both = await startRoundTrip({ DATABASE_URL: overSocket, RULES_DIR: rulesDir([rule]) });
    await createTaskAsAPerson(both.sim, { project_id: 'prj_1', title: 'Plan' });
    await waitUntil(() => tasksCreatedByEngine(both!.sim).length === 1, { timeoutMs: 10_000, what: 'the follow-up task' });
    await quiescence(both);
    expect(tasksCreatedByEngine(both.sim).map((r) => (r.body as { title: string }).title)).toEqual(['Follow-up: Plan']);

    // Asked over TCP, so this test's own session is not one of those counted.
    const sessions = await withPostgresClient(db.url, async (client) =>
      (await client.query<{ client_addr: string | null }>('SELECT client_addr FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name])).rows);
    expect(sessions.length).toBeGreaterThan(0);
    expect(sessions.filter((s) => s.client_addr !== null)).toEqual([]);
  });
});
