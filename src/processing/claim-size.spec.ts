import { CLAIM_MAX_POSTGRES, CLAIM_MIN, claimSize, handedBatchSize } from './claim-size.js';

describe(claimSize.name, () => {
  it('on PostgreSQL doubles the next claim after a full one, up to its ceiling', () => {
    const sizes = [CLAIM_MIN];
    for (let i = 0; i < 5; i++) sizes.push(claimSize('postgres', sizes[i], sizes[i]));
    expect(sizes).toEqual([32, 64, 128, 256, 256, 256]);
    expect(CLAIM_MAX_POSTGRES).toBe(256);
  });

  it('on PostgreSQL goes back to the smallest claim after one that found fewer than it asked for', () => {
    expect(claimSize('postgres', 256, 255)).toBe(CLAIM_MIN);
    expect(claimSize('postgres', 64, 0)).toBe(CLAIM_MIN);
  });

  it('on SQLite always asks for the smallest claim, full or not', () => {
    expect(claimSize('sqlite', 32, 32)).toBe(CLAIM_MIN);
    expect(claimSize('sqlite', 32, 3)).toBe(CLAIM_MIN);
  });
});

describe(handedBatchSize.name, () => {
  it('takes every event handed over that waits, up to the largest claim, on PostgreSQL; the smallest claim on SQLite', () => {
    expect(handedBatchSize('postgres')).toBe(CLAIM_MAX_POSTGRES);
    expect(handedBatchSize('sqlite')).toBe(CLAIM_MIN);
  });
});
