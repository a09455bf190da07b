/**
 * bench/bench-startup.ts's figures as the report prints and judges them: the medians of a full run's starts, with
 * their range, so that one start at a slow moment of the machine neither fails nor passes the target alone.
 */
import type { BenchResults } from './bench-results.js';
import { startupFigures } from './bench-startup.js';
import { startupLines } from './bench-tables.js';
import { judgeTargets } from './bench-targets.js';

const verdictOf = (startup: BenchResults['startup']) =>
  judgeTargets({ closedLoop: [], openLoop: [], backlog: [], startup, waiting: [] } as unknown as BenchResults).find((t) => t.target.startsWith('start-up'));

describe('start-up over several starts', () => {
  it('sums each kind of start up by its median and range', () => {
    const f = startupFigures(1_000, [1.2, 2.4, 1.1, 1.3, 1.25], [1.0, 0.9, 1.1, 2.2, 1.05]);

    expect(f).toEqual({
      ruleFiles: 1_000,
      freshSeconds: 1.25,
      fresh: { median: 1.25, min: 1.1, max: 2.4, starts: 5 },
      restartSeconds: 1.05,
      restart: { median: 1.05, min: 0.9, max: 2.2, starts: 5 },
    });
  });

  it('has no restart figure when no restart was timed (a --quick run)', () => {
    expect(startupFigures(1, [0.8], [])).toEqual({ ruleFiles: 1, freshSeconds: 0.8, fresh: { median: 0.8, min: 0.8, max: 0.8, starts: 1 } });
  });

  it('prints the median, and over more than one start the range and count', () => {
    const lines = startupLines([startupFigures(1_000, [1.2, 2.4, 1.1, 1.3, 1.25], [1.0, 0.9, 1.1, 2.2, 1.05]), startupFigures(1, [0.8], [])]);

    expect(lines).toEqual([
      'start-up, spawn to /health/ready (fresh SQLite file, migrations included): ' +
        '1,000 rule files 1.25 s (1.10–2.40 s, median of 5); restart 1.05 s (0.90–2.20 s, median of 5) | 1 rule file 0.80 s',
    ]);
  });

  it('judges the target on the medians: one slow start does not fail it, slow medians do', () => {
    const oneSlow = verdictOf([startupFigures(1_000, [1.2, 2.4, 1.1, 1.3, 1.25], [1.0, 0.9, 1.1, 2.2, 1.05])]);
    expect(oneSlow).toMatchObject({ figure: '1.25 s (1.10–2.40 s, median of 5) fresh, 1.05 s (0.90–2.20 s, median of 5) restart (1,000 files)', verdict: 'met' });

    expect(verdictOf([startupFigures(1_000, [2.1, 2.4, 1.1, 2.3, 1.25], [1.0, 0.9, 1.1, 2.2, 1.05])])).toMatchObject({ verdict: 'not met' });
    expect(verdictOf([startupFigures(1_000, [1.2, 1.1, 1.3], [2.1, 2.2, 1.0])])).toMatchObject({ verdict: 'not met' });
  });

  it("reads a results file from before the medians, which has one start's figures alone", () => {
    expect(verdictOf([{ ruleFiles: 1_000, freshSeconds: 2.12, restartSeconds: 1.96 }])).toMatchObject({ figure: '2.12 s fresh, 1.96 s restart (1,000 files)', verdict: 'not met' });
  });
});
