import { actionsShortOfCpu } from './runs-ahead.js';

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
