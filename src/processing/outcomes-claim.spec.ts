/**
 * SQLite: while the event loop waits, idle, the commit that records action
 * outcomes claims what waits for a claim and decides it in its own
 * transaction (OutcomesHandOff.lease), and says so (`claimed`): the event
 * loop, which waits for such a commit while runs are in flight, then makes no
 * claim transaction of its own (workers.ts). A busy loop claims for itself,
 * and the commit claims nothing. On a real SQLite database, the core services
 * wired as workers.ts wires them.
 */
import { Logger } from '@nestjs/common';
import type { AttemptOutcome } from '../actions/attempt-outcome.js';
import { openCore, taskEvent, type Core } from '../../test/support/core.js';
import { sqliteUnderTest } from '../../test/support/databases.js';
import { aRule } from '../../test/support/rule-factory.js';
import { ExecutionProgress } from './execution-progress.js';
import { LeasesBeingTaken } from './leases-being-taken.js';
import { OutcomesHandOff } from './outcomes-hand-off.js';
import { ParkedEvents } from './parked-events.js';
import type { ClaimedEvent } from './work.js';

const CLAIM_SIZE = 4;

beforeAll(() => Logger.overrideLogger(false));

describe('the outcomes\' commit claiming for the event loop (SQLite)', () => {
  let core: Core;
  let progress: ExecutionProgress;
  let idle: boolean;
  let claimed: number;
  let nudged: number;
  let handed: ClaimedEvent[];

  beforeEach(async () => {
    core = await openCore(sqliteUnderTest());
    core.useRules(aRule({ id: 'triggers', on: 'task.completed', actions: [{ type: 'workflow.trigger', params: { id: 'wf_1' } }] }));
    idle = true;
    claimed = 0;
    nudged = 0;
    handed = [];
    progress = new ExecutionProgress(core.metrics, core.db);
    progress.handOffTo(new OutcomesHandOff('sqlite', core.clock, core.queue, core.processor, {
      running: () => true, eventLoopIdle: () => idle, parked: new ParkedEvents(250), handed, leasing: new LeasesBeingTaken(core.clock),
      claimedAfter: new Set(), handOff: () => core.queue.handOff(60_000, 10), startCreated: () => undefined, countEvents: () => undefined,
      handedArrived: () => undefined, nudgeEvents: () => nudged++, claimed: () => claimed++,
    }, CLAIM_SIZE));
  });
  afterEach(() => core.close());

  /** A run in flight (an event processed, its run claimed), then `count` events about other tasks waiting for a claim. */
  async function runInFlightAndWaiting(count: number) {
    await core.store(taskEvent('task.completed', { id: 'tsk_first' }));
    await core.processNext();
    const [run] = await core.queue.claimActionRuns(10, 60_000);
    const waiting: string[] = [];
    for (let i = 0; i < count; i++) waiting.push(await core.store(taskEvent('task.completed', { id: `tsk_${i}` })));
    return { run: run!, waiting };
  }

  const recordOutcome = async (run: Awaited<ReturnType<typeof runInFlightAndWaiting>>['run']) => {
    const outcome: AttemptOutcome = { status: 'succeeded', request: JSON.parse(run.request!), responseStatus: 200, response: {}, seconds: 0.01 };
    expect(await progress.record(run, core.queue.owner, outcome, core.clock.now().toISOString())).toBe(true);
  };
  const statuses = async (ids: string[]) => Promise.all(ids.map(async (id) => (await core.event(id))?.status));

  it('claims and decides in that commit what waits, and tells the loop it claimed', async () => {
    const { run, waiting } = await runInFlightAndWaiting(2);
    await recordOutcome(run);

    expect(claimed).toBe(1);
    expect(await statuses(waiting)).toEqual(['processed', 'processed']);
    expect(handed).toEqual([]);
    expect(await core.queue.anyClaimable()).toBe(false);
  });

  it('claims no more than its claim size, and wakes the loop for the rest', async () => {
    const { run, waiting } = await runInFlightAndWaiting(CLAIM_SIZE + 2);
    await recordOutcome(run);

    expect({ claimed, nudged }).toEqual({ claimed: 1, nudged: 1 });
    expect(await statuses(waiting)).toEqual([...Array(CLAIM_SIZE).fill('processed'), 'received', 'received']);
    expect((await core.queue.claimEvents(10)).length).toBe(2);
  });

  it('claims nothing while the loop is busy: the loop claims for itself', async () => {
    const { run, waiting } = await runInFlightAndWaiting(2);
    idle = false;
    await recordOutcome(run);

    expect(claimed).toBe(0);
    expect(await statuses(waiting)).toEqual(['received', 'received']);
    expect((await core.queue.claimEvents(10)).length).toBe(2);
  });
});
