import { StorageUnavailableError } from '../errors.js';
import { StorageHealth } from './storage-health.js';

/** A tracker whose log lines and clock the test holds. */
function aTracker() {
  const lines: Array<{ level: 'warn' | 'log'; entry: Record<string, unknown> }> = [];
  let now = new Date('2026-03-01T12:00:00.000Z');
  const logger = {
    warn: (entry: Record<string, unknown>) => void lines.push({ level: 'warn', entry }),
    log: (entry: Record<string, unknown>) => void lines.push({ level: 'log', entry }),
  };
  const health = new StorageHealth(logger, () => now);
  return { health, lines, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

const FULL = { kind: 'disk_full', message: 'SQLITE_FULL: database or disk is full' } as const;

describe(StorageHealth.name, () => {
  it('reports nothing while writes go through', () => {
    const { health, lines } = aTracker();
    health.recovered();
    expect(health.current).toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('logs a fault once when it starts and once when it ends, however many writes fail between', () => {
    const { health, lines, advance } = aTracker();
    for (let i = 0; i < 50; i++) health.failed(FULL);
    advance(12_345);
    health.recovered();
    health.recovered();
    expect(lines.map((l) => l.level)).toEqual(['warn', 'log']);
    expect(lines[0].entry).toMatchObject({ kind: 'disk_full', error: FULL.message });
    expect(lines[1].entry).toMatchObject({ kinds: ['disk_full'], since: '2026-03-01T12:00:00.000Z', seconds: 12.3, failedWrites: 50 });
    expect(lines.some((l) => 'stack' in l.entry)).toBe(false);
  });

  it('does not end while writes failed less than a second ago: a write that fits into space a failed one took proves little', () => {
    const { health, lines, advance } = aTracker();
    health.failed(FULL);
    advance(5);
    expect(health.recovered()).toBe(false);
    advance(600);
    health.failed(FULL);
    advance(999);
    expect({ settled: health.settled, recovered: health.recovered() }).toEqual({ settled: false, recovered: false });
    advance(1);
    expect({ settled: health.settled, recovered: health.recovered() }).toEqual({ settled: true, recovered: true });
    expect(lines.map((l) => l.level)).toEqual(['warn', 'log']);
  });

  it('counts the requests answered with its refusals, and only those', () => {
    const { health, lines, advance } = aTracker();
    const refusals = [health.failed(FULL), health.failed(FULL), health.failed(FULL)];
    refusals[0].refused();
    refusals[2].refused();
    advance(1_000);
    health.recovered();
    expect(lines[1].entry).toMatchObject({ refusedRequests: 2, failedWrites: 3 });
  });

  it('hands out a 503 storage_unavailable refusal with a Retry-After', () => {
    const refusal = aTracker().health.failed(FULL);
    expect(refusal).toBeInstanceOf(StorageUnavailableError);
    expect({ status: refusal.status, code: refusal.code, kind: refusal.kind, retryAfter: refusal.retryAfterSeconds }).toEqual({
      status: 503,
      code: 'storage_unavailable',
      kind: 'disk_full',
      retryAfter: 5,
    });
    expect(refusal.message).not.toContain('SQLITE');
  });

  it('keeps the last kind while a fault goes on, and counts failures by kind for the metrics', () => {
    const { health, advance } = aTracker();
    health.failed({ kind: 'unreachable', message: 'terminating connection' });
    health.failed({ kind: 'read_only', message: 'cannot execute INSERT in a read-only transaction' });
    health.failed({ kind: 'read_only', message: 'cannot execute UPDATE in a read-only transaction' });
    expect(health.current).toMatchObject({ kind: 'read_only', since: new Date('2026-03-01T12:00:00.000Z') });
    expect(Object.fromEntries(health.failuresByKind)).toEqual({ unreachable: 1, read_only: 2 });
    advance(1_000);
    health.recovered();
    expect(health.current).toBeUndefined();
    expect(Object.fromEntries(health.failuresByKind)).toEqual({ unreachable: 1, read_only: 2 });
  });

  it('starts a new fault, logged again, after one has ended', () => {
    const { health, lines, advance } = aTracker();
    health.failed(FULL);
    advance(1_000);
    health.recovered();
    health.failed(FULL);
    expect(lines.map((l) => l.level)).toEqual(['warn', 'log', 'warn']);
  });

  it('counts the faults that started, not the writes that failed, so that whoever held work across one can tell', () => {
    const { health, advance } = aTracker();
    expect(health.faultsStarted).toBe(0);
    health.failed(FULL);
    health.failed(FULL);
    expect(health.faultsStarted).toBe(1);
    advance(1_000);
    health.recovered();
    expect(health.faultsStarted).toBe(1);
    health.failed(FULL);
    expect(health.faultsStarted).toBe(2);
  });
});
