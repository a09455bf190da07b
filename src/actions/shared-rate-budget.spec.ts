import { databasesUnderTest, withPostgresClient, type TestDatabase } from '../../test/support/databases.js';
import { openDatabase } from '../../test/support/storage.js';
import { waitUntil } from '../../test/support/wait.js';
import type { Database } from '../database/database.service.js';
import { decideGrant, SharedRateBudget, type GrantState } from './shared-rate-budget.js';

const postgres = (await databasesUnderTest('shared rate budget')).find((kind) => kind.name === 'postgres');

describe(`${decideGrant.name}, the grant arithmetic`, () => {
  const at = (state: Partial<GrantState>): GrantState => ({ now: 100_000, pausedUntil: null, used: 0, oldest: null, ...state });
  const span = 62_000;

  it.each([
    ['grants what is asked when the window has room', at({}), 3, { slots: 3, waitMs: 0, paused: false, free: 7, fullForMs: 0 }],
    ['grants at least one slot, however little is asked', at({}), 0, { slots: 1, waitMs: 0, paused: false, free: 9, fullForMs: 0 }],
    ['grants only what is left in the window, and says how long it is full', at({ used: 8, oldest: 90_000 }), 3, { slots: 2, waitMs: 0, paused: false, free: 0, fullForMs: 52_000 }],
    ['refuses a full window until its oldest grant leaves the span', at({ used: 10, oldest: 90_000 }), 1, { slots: 0, waitMs: 52_000, paused: false, free: 0, fullForMs: 0 }],
    ['says how long it is full when the first grant takes every slot', at({}), 10, { slots: 10, waitMs: 0, paused: false, free: 0, fullForMs: 62_000 }],
    ['refuses while paused, until the pause ends', at({ pausedUntil: 104_500 }), 1, { slots: 0, waitMs: 4_500, paused: true, free: 0, fullForMs: 0 }],
    ['ignores a pause that has ended', at({ pausedUntil: 99_000, used: 4, oldest: 95_000 }), 1, { slots: 1, waitMs: 0, paused: false, free: 5, fullForMs: 0 }],
  ])('%s', (_name, state, want, decision) => {
    expect(decideGrant(state, 10, want, span)).toEqual(decision);
  });
});

/** Every grant ever made, copied by a trigger (the budget deletes rows as they age out). */
async function logGrants(url: string): Promise<void> {
  await withPostgresClient(url, async (c) => {
    await c.query('CREATE TABLE grant_log (replica varchar(100), granted_at double precision, slots integer)');
    await c.query(`CREATE FUNCTION log_grant() RETURNS trigger AS $$
      BEGIN INSERT INTO grant_log VALUES (NEW.replica, NEW.granted_at, NEW.slots); RETURN NEW; END $$ LANGUAGE plpgsql`);
    await c.query('CREATE TRIGGER log_grant AFTER INSERT ON rate_budget_grants FOR EACH ROW EXECUTE FUNCTION log_grant()');
  });
}

async function grantLog(db: Database): Promise<Array<{ replica: string; granted_at: number; slots: number }>> {
  return db.dataSource.query('SELECT replica, granted_at, slots FROM grant_log ORDER BY granted_at');
}

/** The most slots granted within `spanMs` before and including any one grant. */
function mostGrantedInSpan(grants: Array<{ granted_at: number; slots: number }>, spanMs: number): number {
  return Math.max(0, ...grants.map((g) => grants.filter((o) => o.granted_at <= g.granted_at && o.granted_at > g.granted_at - spanMs).reduce((n, o) => n + o.slots, 0)));
}

/** The most of `starts` (ms, sorted) in any window [t, t + windowMs). */
function mostInWindow(starts: number[], windowMs: number): number {
  let most = 0;
  for (let first = 0, last = 0; last < starts.length; last += 1) {
    while (starts[last]! - starts[first]! >= windowMs) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

(postgres ? describe : describe.skip)(`${SharedRateBudget.name} on PostgreSQL, three replicas on one database`, () => {
  let testDb: TestDatabase;
  let dbs: Database[] = [];

  beforeEach(async () => {
    testDb = await postgres!.create();
    // One data source per replica, as separate processes would have.
    dbs = [await openDatabase(testDb.url), await openDatabase(testDb.url), await openDatabase(testDb.url)];
    await logGrants(testDb.url);
  });

  afterEach(async () => {
    for (const db of dbs) await db.dataSource.destroy();
    await testDb.drop();
  });

  const replicas = (options: { limit: number; windowMs: number; graceMs: number; monotonic?: () => number }) =>
    dbs.map((db, i) => new SharedRateBudget({ db, replica: `replica-${i}`, limitPerMinute: options.limit, clock: Date.now, ...options }));

  describe('under load from every replica', () => {
    it('never grants more than the limit in any span, and never lets more than the limit start in any window', async () => {
      const windowMs = 1_500;
      const graceMs = 200;
      const budgets = replicas({ limit: 10, windowMs, graceMs });
      const starts: number[] = [];
      const until = performance.now() + 4_500;
      // Each replica keeps four callers asking as fast as the budget lets them.
      const caller = async (budget: SharedRateBudget) => {
        while (performance.now() < until) {
          const wait = await budget.take();
          if (wait === 0) starts.push(performance.now());
          else await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 50)));
        }
      };
      await Promise.all(budgets.flatMap((budget) => [caller(budget), caller(budget), caller(budget), caller(budget)]));

      const grants = await grantLog(dbs[0]);
      expect(new Set(grants.map((g) => g.replica)).size).toBe(3);
      expect(mostGrantedInSpan(grants, windowMs + graceMs)).toBeLessThanOrEqual(10);
      starts.sort((a, b) => a - b);
      expect(mostInWindow(starts, windowMs)).toBeLessThanOrEqual(10);
      // The budget frees again as grants leave the span: 4.5 s hold more than two spans' worth.
      expect(starts.length).toBeGreaterThan(20);
    });
  });

  describe('a grant that waits for the lock', () => {
    it('is stamped with the clock after the lock, later than the grant it waited behind', async () => {
      const [a] = replicas({ limit: 10, windowMs: 60_000, graceMs: 200 });
      await withPostgresClient(testDb.url, async (holder) => {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM rate_budget WHERE id = 1 FOR UPDATE');
        const taking = a.take();
        await waitUntil(
          async () => {
            const { rows } = await holder.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
            return rows.length > 0;
          },
          { what: 'the grant to wait for the lock' },
        );
        const { rows } = await holder.query(`SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8 AS now`);
        await holder.query('COMMIT');
        expect(await taking).toBe(0);
        const [grant] = await grantLog(dbs[0]);
        // Stamped before the wait, a grant could be older than one made while it waited (see the module's comment).
        expect(grant!.granted_at).toBeGreaterThan(rows[0].now);
      });
    });
  });

  describe('a pause', () => {
    it('written by one replica holds the others until it ends', async () => {
      const [a, b, c] = replicas({ limit: 10, windowMs: 60_000, graceMs: 200 });
      expect(await c.take()).toBe(0);
      await a.sharePause(1_000);

      const wait = await b.take();
      expect(wait).toBeGreaterThan(500);
      expect(wait).toBeLessThanOrEqual(1_000);
      expect(b.pausedUntil()).toBeDefined();
      expect(b.remaining()).toBe(0);
      expect(b.room(5)).toEqual({ free: 0, waitMs: expect.any(Number) });
      await new Promise((resolve) => setTimeout(resolve, wait));
      expect(await b.take()).toBe(0);
      expect((await grantLog(dbs[0])).map((g) => g.replica)).toEqual(['replica-2', 'replica-1']);
    });
  });

  describe('slots not used within the grace period', () => {
    it('are forfeited, and still count against the window', async () => {
      let mono = 0;
      const [a, b] = replicas({ limit: 90, windowMs: 60_000, graceMs: 2_000, monotonic: () => mono });
      // Demand grows with each call (takes in the last G), up to 90 / 30 = 3 slots a grant.
      for (let call = 0; call < 4; call += 1) expect(await a.take()).toBe(0);
      expect((await grantLog(dbs[0])).map((g) => g.slots)).toEqual([1, 2, 3]);
      expect(a.room(10).free).toBeGreaterThanOrEqual(2); // two of the last grant are held

      mono += 2_001; // past G: the two held slots are forfeited, and the next call needs a grant of its own
      expect(await a.take()).toBe(0);
      expect((await grantLog(dbs[0])).map((g) => g.slots)).toEqual([1, 2, 3, 1]);

      // 7 slots granted for 5 calls: the other replica is granted at most the other 83.
      let granted = 0;
      while ((await b.take()) === 0) granted += 1;
      expect(granted).toBe(83);
    });
  });
});
