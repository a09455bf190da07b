/** Which leases of action runs a process may hand back after a storage fault (leases-being-taken.ts). */
import { ManualClock } from '../../test/support/storage.js';
import { LeasesBeingTaken } from './leases-being-taken.js';

describe('leases being taken', () => {
  const start = new Date('2026-01-01T00:00:00.000Z');
  let clock: ManualClock;
  let leases: LeasesBeingTaken;

  beforeEach(() => {
    clock = new ManualClock(start);
    leases = new LeasesBeingTaken(clock);
  });

  it('counts every lease taken before now as handed back-able when nothing is taking any', () => {
    clock.advance(5_000);
    expect(leases.takenBefore()).toBe(start.getTime() + 5_000);
  });

  it('holds back the leases taken since the oldest claim or commit still under way', () => {
    const first = leases.starts();
    clock.advance(1_000);
    const second = leases.starts();
    clock.advance(1_000);
    expect(leases.takenBefore()).toBe(start.getTime());
    leases.ends(first);
    expect(leases.takenBefore()).toBe(start.getTime() + 1_000);
    leases.ends(second);
    expect(leases.takenBefore()).toBe(start.getTime() + 2_000);
  });

  it('holds back the leases taken since a piece of work began until it settles, whether it succeeded or threw', async () => {
    let finish!: () => void;
    const succeeding = leases.during(() => new Promise<string>((resolve) => (finish = () => resolve('done'))));
    clock.advance(1_000);
    await expect(leases.during(async () => {
      expect(leases.takenBefore()).toBe(start.getTime());
      throw new Error('refused');
    })).rejects.toThrow('refused');
    expect(leases.takenBefore()).toBe(start.getTime());
    finish();
    await expect(succeeding).resolves.toBe('done');
    expect(leases.takenBefore()).toBe(start.getTime() + 1_000);
  });

  it("keeps one of intake's commits at a time: the next one's start ends the last one's, which may have failed untold", () => {
    leases.commitStarts('intake');
    clock.advance(1_000);
    leases.commitStarts('intake');
    clock.advance(1_000);
    expect(leases.takenBefore()).toBe(start.getTime() + 1_000);
    leases.commitEnds('intake');
    expect(leases.takenBefore()).toBe(start.getTime() + 2_000);
    leases.commitEnds('intake'); // ended already: nothing changes
    expect(leases.takenBefore()).toBe(start.getTime() + 2_000);
  });

  it("keeps intake's commit and the outcomes' apart: each ends only its own", () => {
    leases.commitStarts('intake');
    clock.advance(1_000);
    leases.commitStarts('outcomes');
    clock.advance(1_000);
    leases.commitStarts('outcomes');
    expect(leases.takenBefore()).toBe(start.getTime());
    leases.commitEnds('intake');
    expect(leases.takenBefore()).toBe(start.getTime() + 2_000);
    leases.commitEnds('outcomes');
    clock.advance(1_000);
    expect(leases.takenBefore()).toBe(start.getTime() + 3_000);
  });
});
