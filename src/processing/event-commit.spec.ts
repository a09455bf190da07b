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
});
