import { firstSeqSince, minuteSeries } from './admin-overview.service.js';

describe(minuteSeries.name, () => {
  const now = new Date('2026-11-23T10:30:45.000Z');

  it('gives the 60 minutes up to now, oldest first, zero where nothing happened', () => {
    const series = minuteSeries(now, []);
    expect(series).toHaveLength(60);
    expect(series[0].minute).toBe('2026-11-23T09:31');
    expect(series[59]).toEqual({ minute: '2026-11-23T10:30', counts: {} });
  });

  it('puts each count in its minute and ignores minutes outside the hour', () => {
    const series = minuteSeries(now, [
      { minute: '2026-11-23T10:30', status: 'processed', n: '3' },
      { minute: '2026-11-23T10:30', status: 'ignored', n: 2 },
      { minute: '2026-11-23T09:31', status: 'failed', n: 1 },
      { minute: '2026-11-23T09:30', status: 'failed', n: 9 },
    ]);
    expect(series[59].counts).toEqual({ processed: 3, ignored: 2 });
    expect(series[0].counts).toEqual({ failed: 1 });
    expect(series.reduce((sum, m) => sum + (m.counts.failed ?? 0), 0)).toBe(1);
  });
});

describe(firstSeqSince.name, () => {
  // seq → time received; gaps in seq (pruned rows) are skipped over by "the next row at or after".
  const rows = [1, 2, 3, 7, 8, 12, 20].map((seq) => ({ seq, at: `2026-11-23T10:${String(seq).padStart(2, '0')}` }));
  const atOf = async (seq: number) => rows.find((r) => r.seq >= seq);
  const lookups = () => {
    let n = 0;
    return { atOf: (seq: number) => (n++, atOf(seq)), count: () => n };
  };

  it.each([
    ['before every row', '2026-11-23T09:00', 1],
    ['exactly a row', '2026-11-23T10:07', 7],
    ['between rows, in a gap of seq', '2026-11-23T10:05', 7],
    ['the last row', '2026-11-23T10:20', 20],
    ['after every row', '2026-11-23T11:00', 21],
  ])('finds the first row %s', async (_case, since, expected) => {
    expect(await firstSeqSince(1, 20, since, atOf)).toBe(expected);
  });

  it('reads O(log n) rows', async () => {
    const probe = lookups();
    await firstSeqSince(1, 20, '2026-11-23T10:08', probe.atOf);
    expect(probe.count()).toBeLessThanOrEqual(6);
  });
});
