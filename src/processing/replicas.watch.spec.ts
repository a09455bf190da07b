import { HeartbeatWatch, statusOf } from './replicas.watch.js';

describe(HeartbeatWatch.name, () => {
  const beat = (id: string, heartbeat_at: string) => ({ id, heartbeat_at });

  describe('a heartbeat that stands still', () => {
    it('is stale once it has not moved for the whole dead-after time, by the watcher\'s own clock', () => {
      const watch = new HeartbeatWatch(5_000);
      expect(watch.stale([beat('a', 't1')], 0)).toEqual([]);
      expect(watch.stale([beat('a', 't1')], 4_999)).toEqual([]);
      expect(watch.stale([beat('a', 't1')], 5_000)).toEqual([beat('a', 't1')]);
    });

    it('is judged without comparing clocks: a heartbeat written hours "in the past" by a slow clock is fine while it moves', () => {
      const watch = new HeartbeatWatch(5_000);
      const skewed = (s: number) => new Date(Date.UTC(2020, 0, 1, 0, 0, s)).toISOString();
      for (let s = 0; s < 20; s++) expect(watch.stale([beat('a', skewed(s))], s * 1_000)).toEqual([]);
    });

    it('waits the whole dead-after time for a replica it has just started watching', () => {
      const watch = new HeartbeatWatch(5_000);
      expect(watch.stale([beat('old', 'long ago')], 1_000_000)).toEqual([]);
      expect(watch.stale([beat('old', 'long ago')], 1_005_000)).toEqual([beat('old', 'long ago')]);
    });
  });

  describe('a heartbeat that moves', () => {
    it('starts the wait again', () => {
      const watch = new HeartbeatWatch(5_000);
      watch.stale([beat('a', 't1'), beat('b', 'u1')], 0);
      expect(watch.stale([beat('a', 't2'), beat('b', 'u1')], 4_000)).toEqual([]);
      expect(watch.stale([beat('a', 't2'), beat('b', 'u1')], 5_000)).toEqual([beat('b', 'u1')]);
      expect(watch.stale([beat('a', 't2'), beat('b', 'u1')], 9_000)).toEqual([beat('a', 't2'), beat('b', 'u1')]);
    });
  });

  it('judges no one for the whole dead-after time after it is told to forget (this process could not reach the database either)', () => {
    const watch = new HeartbeatWatch(5_000);
    watch.stale([beat('a', 't1')], 0);
    watch.forget();
    expect(watch.stale([beat('a', 't1')], 6_000)).toEqual([]);
    expect(watch.stale([beat('a', 't1')], 10_999)).toEqual([]);
    expect(watch.stale([beat('a', 't1')], 11_000)).toEqual([beat('a', 't1')]);
  });

  it('forgets a replica that is no longer listed (taken over, or stopped), and watches it afresh when it comes back', () => {
    const watch = new HeartbeatWatch(5_000);
    watch.stale([beat('a', 't1')], 0);
    watch.stale([], 6_000);
    expect(watch.stale([beat('a', 't1')], 7_000)).toEqual([]);
    expect(watch.stale([beat('a', 't1')], 12_000)).toEqual([beat('a', 't1')]);
  });
});

describe(statusOf.name, () => {
  it.each([
    [null, null, 'alive'],
    [null, '2026-01-01T00:00:05.000Z', 'dead'],
    ['2026-01-01T00:00:05.000Z', null, 'stopped'],
    ['2026-01-01T00:00:05.000Z', '2026-01-01T00:00:09.000Z', 'stopped'],
  ] as const)('stopped_at %s, dead_at %s: %s', (stopped_at, dead_at, status) => {
    expect(statusOf({ stopped_at, dead_at })).toBe(status);
  });
});
