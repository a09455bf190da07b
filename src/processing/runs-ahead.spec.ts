import { actionsShortOfCpu, RUNS_AHEAD_MAX, RunsAhead } from './runs-ahead.js';

describe('actionsShortOfCpu', () => {
  it('holds when the last claim took all the room it had and slots are free', () => {
    expect(actionsShortOfCpu({ asked: 32, took: 32 }, 10, 64)).toBe(true);
  });

  it('does not hold when the last claim found fewer runs than it had room for', () => {
    expect(actionsShortOfCpu({ asked: 32, took: 5 }, 10, 64)).toBe(false);
  });

  it('does not hold when every slot is busy (a slow service)', () => {
    expect(actionsShortOfCpu({ asked: 32, took: 32 }, 64, 64)).toBe(false);
  });

  it('does not hold when the rate budget left no room to claim', () => {
    expect(actionsShortOfCpu({ asked: 0, took: 0 }, 0, 64)).toBe(false);
  });

  it('does not hold before the action loop has claimed, or after its claim failed', () => {
    expect(actionsShortOfCpu(undefined, 0, 64)).toBe(false);
  });
});

describe(RunsAhead.name, () => {
  const free = { busy: 10, max: 64 };
  const ahead = (runs: RunsAhead) => runs.ahead(free.busy, free.max);

  it('is ahead once the runs it left for want of room reach the limit while the action loop takes all it asks for', () => {
    const runs = new RunsAhead();
    runs.claimed({ asked: 32, took: 32 });
    runs.created(RUNS_AHEAD_MAX - 1);
    expect(ahead(runs)).toBe(false);
    runs.created(1);
    expect(ahead(runs)).toBe(true);
  });

  it('counts down by what the action claims take', () => {
    const runs = new RunsAhead();
    runs.created(RUNS_AHEAD_MAX + 31);
    runs.claimed({ asked: 32, took: 32 });
    expect(ahead(runs)).toBe(false);
    runs.created(1);
    expect(ahead(runs)).toBe(true);
  });

  it('forgets them when a claim finds fewer runs than it had room for (another replica took them, or none are due)', () => {
    const runs = new RunsAhead();
    runs.created(1_000);
    runs.claimed({ asked: 32, took: 3 });
    runs.claimed({ asked: 32, took: 32 });
    expect(ahead(runs)).toBe(false);
  });

  it('is never ahead while every slot is busy or the rate budget leaves no room', () => {
    const runs = new RunsAhead();
    runs.created(1_000);
    runs.claimed({ asked: 32, took: 32 });
    expect(runs.ahead(64, 64)).toBe(false);
    runs.claimed({ asked: 0, took: 0 });
    expect(ahead(runs)).toBe(false);
    runs.claimed(undefined);
    expect(ahead(runs)).toBe(false);
  });
});
