import { chainPosition, isLoopBlocked, SELF_CAUSED_WINDOW_MS, type ChainPosition } from './loop-guard.js';

const now = new Date('2026-05-04T12:00:00.000Z');
const ago = (ms: number) => new Date(now.getTime() - ms).toISOString();
const MINUTE = 60_000;

describe('loop guard', () => {
  describe(chainPosition.name, () => {
    it('treats an event about a resource the engine never touched as an outside event', () => {
      expect(chainPosition(null, now)).toEqual({ selfCaused: false, depth: 0 });
    });

    it.each([
      ['just now', 0, 0, 1],
      ['a second ago, by an outside event’s action', 1000, 0, 1],
      ['five minutes ago, two links into a chain', 5 * MINUTE, 2, 3],
      ['exactly ten minutes ago (the window is inclusive)', SELF_CAUSED_WINDOW_MS, 4, 5],
    ])('counts a change the engine made %s as self-caused, one link deeper', (_when, age, depth, expectedDepth) => {
      expect(chainPosition({ depth, changedAt: ago(age) }, now)).toEqual({ selfCaused: true, depth: expectedDepth });
    });

    it.each([
      ['a millisecond past ten minutes', SELF_CAUSED_WINDOW_MS + 1],
      ['an hour ago', 60 * MINUTE],
      ['a week ago', 7 * 24 * 60 * MINUTE],
    ])('forgets a change the engine made %s: the event starts a new chain', (_when, age) => {
      expect(chainPosition({ depth: 3, changedAt: ago(age) }, now)).toEqual({ selfCaused: false, depth: 0 });
    });

    it.each([
      ['a millisecond ahead', -1],
      ['a minute ahead (another replica’s clock runs fast)', -MINUTE],
    ])('does not trust a change timestamped in the future (%s)', (_when, age) => {
      expect(chainPosition({ depth: 1, changedAt: ago(age) }, now)).toEqual({ selfCaused: false, depth: 0 });
    });

    it('does not trust a timestamp it cannot read', () => {
      expect(chainPosition({ depth: 1, changedAt: 'not a date' }, now)).toEqual({ selfCaused: false, depth: 0 });
    });

    it('is one SELF_CAUSED_WINDOW_MS of ten minutes', () => {
      expect(SELF_CAUSED_WINDOW_MS).toBe(10 * MINUTE);
    });
  });

  describe(isLoopBlocked.name, () => {
    const at = (selfCaused: boolean, depth: number): ChainPosition => ({ selfCaused, depth });

    it.each([
      [at(false, 0), 5, false, 'an outside event'],
      [at(true, 1), 5, false, 'the first engine-caused event'],
      [at(true, 4), 5, false, 'one link short of the limit'],
      [at(true, 5), 5, true, 'the link that reaches the limit'],
      [at(true, 9), 5, true, 'a link past the limit'],
      [at(true, 1), 1, true, 'the first engine-caused event when the limit is 1'],
      [at(false, 7), 5, false, 'an event that is not self-caused, whatever its depth'],
    ])('%j with MAX_CHAIN_DEPTH %i → blocked: %s (%s)', (position, max, blocked) => {
      expect(isLoopBlocked(position, max)).toBe(blocked);
    });

    it('lets a self-feeding rule act exactly MAX_CHAIN_DEPTH times for one outside event', () => {
      // Walk the chain as the engine does: each action records the depth of the
      // event that caused it, and the next event about that resource is one deeper.
      const max = 3;
      let position = chainPosition(null, now);
      let actions = 0;
      while (!isLoopBlocked(position, max)) {
        actions++;
        position = chainPosition({ depth: position.depth, changedAt: now.toISOString() }, now);
        if (actions > 100) throw new Error('the chain never ends');
      }
      expect(actions).toBe(max);
      expect(position).toEqual({ selfCaused: true, depth: max });
    });
  });
});
