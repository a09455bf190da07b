import { isoAfter, isoOf, isoString } from './clock.js';

describe('isoString', () => {
  const same = (ms: number) => expect(isoString(ms)).toBe(new Date(ms).toISOString());

  it('writes what toISOString writes, instant by instant through minutes, hours, days and years', () => {
    const starts = [Date.UTC(2026, 10, 29, 7, 41, 59, 990), Date.UTC(2026, 11, 31, 23, 59, 59, 0), Date.UTC(2024, 1, 29, 23, 59, 58, 500), 0, -1_500];
    for (const start of starts) for (let ms = start; ms < start + 3_000; ms += 7) same(ms);
  });

  it('writes what toISOString writes for instants at random, in any order', () => {
    let seed = 42;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    for (let i = 0; i < 20_000; i++) same(Math.floor((next() / 2 ** 31) * 8.64e15 * (i % 2 ? 1 : -1) / 1_000));
  });

  it('writes what toISOString writes for instants from two minutes in turn, and from three', () => {
    const now = Date.UTC(2026, 10, 29, 7, 41, 50, 0);
    for (let ms = now; ms < now + 20_000; ms += 13) {
      same(ms);
      same(ms + 30_000);
      if (ms % 3 === 0) same(ms + 90_000);
    }
  });

  it('drops a fraction of a millisecond as Date does', () => {
    for (const ms of [1_764_400_000_123.9, 0.5, -0.5, -1_500.7, 59_999.999]) same(ms);
  });

  it('keeps every millisecond and second with its zeros', () => {
    const minute = Date.UTC(2026, 0, 1, 0, 0);
    for (const offset of [0, 1, 9, 10, 99, 100, 999, 1_000, 9_009, 10_010, 59_999]) same(minute + offset);
  });

  it('writes the years toISOString writes beyond 9999 and before 0', () => {
    same(Date.UTC(10_000, 0, 1, 0, 0, 1, 5));
    same(Date.UTC(-1, 5, 1, 12, 30, 45, 123));
    same(8.64e15);
    same(-8.64e15);
  });

  it('refuses what toISOString refuses', () => {
    expect(() => isoString(Number.NaN)).toThrow(RangeError);
    expect(() => isoString(8.64e15 + 1)).toThrow(RangeError);
    expect(() => isoOf(new Date('not a date'))).toThrow(RangeError);
  });

  it('is what isoOf and isoAfter give', () => {
    const at = new Date(Date.UTC(2026, 10, 29, 7, 41, 12, 34));
    expect(isoOf(at)).toBe('2026-11-29T07:41:12.034Z');
    expect(isoAfter(at, 48_000)).toBe('2026-11-29T07:42:00.034Z');
  });
});
