import { executionId } from './event-commit.js';

describe('executionId', () => {
  it('is a version 7 UUID that starts with the milliseconds it was made at', () => {
    const id = executionId(0x19a2b3c4d5e);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(id.slice(0, 13)).toBe('019a2b3c-4d5e');
  });

  it('sorts by time, and ids of the same millisecond differ', () => {
    const ids = [1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000].map((ms) => executionId(ms));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(Array.from({ length: 1000 }, () => executionId(1_700_000_000_000))).size).toBe(1000);
  });

  it("spends its random digits evenly: each of the 18 random digits takes every value, the variant's digit all four", () => {
    // 5,000 ids cross the pool's refill (400 ids a pool) a dozen times.
    const ids = Array.from({ length: 5_000 }, () => executionId(1_700_000_000_000).replace(/-/g, '').slice(12));
    const seen = Array.from({ length: 20 }, (_, position) => new Set(ids.map((id) => id[position])));
    expect(seen[0]).toEqual(new Set(['7']));
    expect(seen[4]).toEqual(new Set(['8', '9', 'a', 'b']));
    for (const position of [1, 2, 3, ...Array.from({ length: 15 }, (_, i) => i + 5)]) expect(seen[position]!.size).toBe(16);
  });
});
