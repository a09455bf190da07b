/**
 * Group commit (group-commit.ts): items submitted together share one
 * transaction, and (holdWhileArriving) while more keep arriving or are said to
 * be on their way a batch waits a turn or two of the event loop for them. On a
 * real database of each kind.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { databasesUnderTest } from '../../test/support/databases.js';
import { useQueueStore } from '../../test/support/storage.js';
import { GroupCommit, MAX_HOLDS, type GroupCommitOptions } from './group-commit.js';
import { statementsOf } from './statements.js';

const kinds = await databasesUnderTest('group commit');

describe.each(kinds)('group commit on $name', (kind) => {
  const store = useQueueStore(kind);

  /** A group commit whose batches run one statement each; `batches` holds each batch's items. */
  function recording(options: GroupCommitOptions = {}) {
    const batches: number[][] = [];
    const commit = new GroupCommit<number, number>(store.db, async (manager, items) => {
      await statementsOf(manager).rows('SELECT 1 AS one');
      batches.push(items);
      return items.map((n) => n * 2);
    }, options);
    return { commit, batches };
  }

  it('commits the items submitted in one turn together, and those of a later turn apart', async () => {
    const { commit, batches } = recording();
    const first = Promise.all([commit.submit(1), commit.submit(2)]);
    await nextTurn();
    await nextTurn();
    expect(await Promise.all([first, commit.submit(3)])).toEqual([[2, 4], 6]);
    expect(batches).toEqual([[1, 2], [3]]);
  });

  it('waits a turn for items on their way, so that one submitted in the next turn joins the batch', async () => {
    let onTheirWay = true;
    const { commit, batches } = recording({ holdWhileArriving: true, moreOnTheirWay: () => onTheirWay });
    const first = commit.submit(1);
    await nextTurn(); // the batch's first look: one on its way
    const second = commit.submit(2);
    onTheirWay = false;
    expect(await Promise.all([first, second])).toEqual([2, 4]);
    expect(batches).toEqual([[1, 2]]);
  });

  it('waits a turn while the batch grew in the turn before, and commits once a turn brings nothing', async () => {
    const { commit, batches } = recording({ holdWhileArriving: true });
    const burst = [commit.submit(1), commit.submit(2)]; // two in one turn: more may follow
    await nextTurn();
    burst.push(commit.submit(3)); // it grew again: one more turn
    await nextTurn();
    await nextTurn(); // a turn that brought nothing: the batch has gone to the database
    const late = commit.submit(4);
    expect(await Promise.all([...burst, late])).toEqual([2, 4, 6, 8]);
    expect(batches).toEqual([[1, 2, 3], [4]]);
  });

  it('commits an item that came alone at once', async () => {
    const { commit, batches } = recording({ holdWhileArriving: true });
    const first = commit.submit(1);
    await nextTurn(); // its batch has gone to the database without waiting
    expect(await Promise.all([first, commit.submit(2)])).toEqual([2, 4]);
    expect(batches).toEqual([[1], [2]]);
  });

  it(`waits no more than ${MAX_HOLDS} turns, however many are said to be on their way or keep arriving`, async () => {
    const { commit, batches } = recording({ holdWhileArriving: true, moreOnTheirWay: () => true });
    const submitted = [commit.submit(1), commit.submit(2)];
    for (let turn = 0; turn < MAX_HOLDS; turn++) {
      await nextTurn();
      submitted.push(commit.submit(3 + turn)); // arriving in every turn
    }
    await nextTurn();
    // The first batch has gone (or is going) to the database: the next item makes a batch of its own.
    submitted.push(commit.submit(9));
    expect(await Promise.all(submitted)).toEqual([2, 4, 6, 8, 18]);
    expect(batches).toEqual([[1, 2, 3, 4], [9]]);
  });

  it('holds nothing without holdWhileArriving, whatever is said to be on its way', async () => {
    const { commit, batches } = recording({ moreOnTheirWay: () => true });
    const first = [commit.submit(1), commit.submit(2)];
    await nextTurn();
    expect(await Promise.all([...first, commit.submit(3)])).toEqual([2, 4, 6]);
    expect(batches).toEqual([[1, 2], [3]]);
  });

  it('is settled once every item submitted so far is committed or refused, its caller told', async () => {
    const told: string[] = [];
    let refuse = false;
    const commit = new GroupCommit<number, number>(store.db, async (manager, items) => {
      await statementsOf(manager).rows('SELECT 1 AS one');
      if (refuse) throw new Error('refused');
      return items;
    });
    await commit.settled(); // nothing submitted: settled at once
    void commit.submit(1).then(() => told.push('1 committed'));
    await commit.settled();
    expect(told).toEqual(['1 committed']);

    refuse = true;
    void commit.submit(2).catch(() => told.push('2 refused'));
    await commit.settled();
    expect(told).toEqual(['1 committed', '2 refused']);
  });
});
