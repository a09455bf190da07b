/**
 * `npm run bench:steps`: its options (refused with a message that names what
 * is wrong) and the line it prints each second.
 */
import { BenchUsageError } from './bench-options.js';
import { DEFAULT_STEPS, parseSteps, secondLine, stepsOptions, type Reading } from './bench-steps.js';
import { OPEN_LOOP_SOCKETS } from './bench-e2e.js';

describe('bench:steps', () => {
  it('reads steps as RATExSECONDS, in order', () => {
    expect(parseSteps('3000x10, 4500x5,3000x30')).toEqual([
      { rate: 3000, seconds: 10 }, { rate: 4500, seconds: 5 }, { rate: 3000, seconds: 30 },
    ]);
    expect(stepsOptions([])).toEqual({ steps: parseSteps(DEFAULT_STEPS), connections: OPEN_LOOP_SOCKETS });
    expect(stepsOptions(['--steps', '800x2', '--connections', '64'])).toEqual({ steps: [{ rate: 800, seconds: 2 }], connections: 64 });
  });

  it.each(['', '3000', '3000x', 'x10', '0x10', '3000x0', '3000x1.5', '3,000x10', '3000x10,'])('refuses the steps %j', (text) => {
    expect(() => parseSteps(text)).toThrow(BenchUsageError);
    expect(() => parseSteps(text)).toThrow(/--steps: ".*" is not RATExSECONDS/);
  });

  it('refuses connections that are not a whole number over 0', () => {
    expect(() => stepsOptions(['--connections', '0'])).toThrow('--connections must be a whole number ≥ 1, not "0"');
    expect(() => stepsOptions(['--connections', 'many'])).toThrow('--connections must be a whole number ≥ 1, not "many"');
  });

  it('prints each second as rates over the time between its readings, the backlog as it stands', () => {
    const before: Reading = { atS: 10, sent: 30_000, acknowledged: 29_900, actedOn: 29_000, engineCpuS: 10, machine: { busy: 1_000, total: 2_000 }, rssMb: 150 };
    const now: Reading = { atS: 12, sent: 39_000, acknowledged: 38_900, actedOn: 35_000, engineCpuS: 12.1, machine: { busy: 1_300, total: 2_400 }, rssMb: 201.6 };
    expect(secondLine(before, now)).toBe(
      '  12 s  sent  4,500/s  acknowledged  4,500/s  acted on  3,000/s  backlog   3,900  engine  105 %  machine 75 %  RSS 202 MB');
    expect(secondLine({ ...before, machine: undefined }, now)).toContain('machine –  RSS');
  });
});
