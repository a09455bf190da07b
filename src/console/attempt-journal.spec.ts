import { AttemptJournal, MAX_RUNS, type AttemptRecord } from './attempt-journal.js';

function attempt(n: number): AttemptRecord {
  return { started_at: new Date(n * 1000).toISOString(), duration_ms: n, outcome: 'ok', status: 201, error: null, retry_after: null };
}

describe('AttemptJournal', () => {
  it('keeps each run\'s attempts in order', () => {
    const journal = new AttemptJournal();
    journal.record('a', attempt(1));
    journal.record('b', attempt(2));
    journal.record('a', attempt(3));
    expect(journal.attemptsOf('a')?.map((a) => a.duration_ms)).toEqual([1, 3]);
    expect(journal.attemptsOf('b')?.map((a) => a.duration_ms)).toEqual([2]);
    expect(journal.attemptsOf('c')).toBeUndefined();
  });

  it('remembers at least the last MAX_RUNS runs attempted, and at most twice as many', () => {
    const journal = new AttemptJournal();
    const runs = 5 * MAX_RUNS;
    for (let i = 0; i < runs; i++) journal.record(`run-${i}`, attempt(i));
    for (let i = runs - MAX_RUNS; i < runs; i++) expect(journal.attemptsOf(`run-${i}`)).toHaveLength(1);
    let remembered = 0;
    for (let i = 0; i < runs; i++) if (journal.attemptsOf(`run-${i}`)) remembered++;
    expect(remembered).toBeGreaterThanOrEqual(MAX_RUNS);
    expect(remembered).toBeLessThanOrEqual(2 * MAX_RUNS);
    expect(journal.attemptsOf('run-0')).toBeUndefined();
  });

  it('keeps a run attempted again among the newest, however old its first attempt', () => {
    const journal = new AttemptJournal();
    journal.record('retried', attempt(0));
    for (let i = 0; i < 3 * MAX_RUNS; i++) {
      journal.record(`run-${i}`, attempt(i));
      if (i % (MAX_RUNS / 2) === 0) journal.record('retried', attempt(i));
    }
    expect(journal.attemptsOf('retried')?.length).toBe(7);
  });

  it('keeps the first attempt and the latest ones of a run attempted very often', () => {
    const journal = new AttemptJournal();
    for (let i = 0; i < 200; i++) journal.record('busy', attempt(i));
    const kept = journal.attemptsOf('busy')!.map((a) => a.duration_ms);
    expect(kept).toHaveLength(50);
    expect(kept[0]).toBe(0);
    expect(kept.at(-1)).toBe(199);
    expect(kept[1]).toBe(151);
  });
});
