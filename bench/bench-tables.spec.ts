/**
 * bench/bench-tables.ts and bench-targets.ts with the in-memory flow engine among the systems: the line that sets the
 * engine against it, the note on a system that acknowledged more than it did, and the targets, which are the
 * engine's alone (the flow engine's memory is not the engine's).
 */
import type { ClosedLoopFigures } from './bench-closed.js';
import type { BenchResults } from './bench-results.js';
import { backendsNote, closedLoopLines, handledPerSecond, versusFlowEngine } from './bench-tables.js';
import { judgeTargets } from './bench-targets.js';

/** A closed-loop figure: `handled` events done (actions arrived) over `seconds` of sending and `drainSeconds` after. */
function run(system: ClosedLoopFigures['system'], f: { eventsPerSecond: number; handled: number; cpuSeconds: number; drainSeconds?: number; backlogAtEnd?: number; leftAfterDrain?: number; peakRssMb?: number }): ClosedLoopFigures {
  return {
    system, kind: 'e2e', connectionMode: 'keep-alive', connections: 32, layout: 'child', seconds: 10, sent: 0, acknowledged: 0, failed: {}, ranOut: false,
    acknowledgedPerSecond: 0, ackLatencyMs: { p50: 1, p99: 2, p999: 3, max: 4 }, eventsPerSecond: f.eventsPerSecond, e2eLatencyMs: { p50: 1, p99: 2, p999: 3, max: 4 },
    backlogAtEnd: f.backlogAtEnd ?? 0, drainSeconds: f.drainSeconds ?? 0, leftAfterDrain: f.leftAfterDrain ?? 0, duplicateActions: 0,
    cpuSeconds: f.cpuSeconds, eventsPerCpuSecond: f.handled / f.cpuSeconds, benchCpuPercent: 40, memory: { rssMb: 100, peakRssMb: f.peakRssMb ?? 150 },
  } as ClosedLoopFigures;
}

// Today's quick run, in round figures: the flow engine acknowledged at once, acted on 188 a second while sent to, and
// finished the rest in the 2.8 s after.
const flow = run('flow', { eventsPerSecond: 188, handled: 13_000, cpuSeconds: 15, drainSeconds: 2.5, backlogAtEnd: 4_700, peakRssMb: 252 });
const sqlite = run('sqlite', { eventsPerSecond: 2_600, handled: 26_000, cpuSeconds: 10 });
const postgres = run('postgres', { eventsPerSecond: 1_300, handled: 13_000, cpuSeconds: 10 });

describe('the engine against the in-memory flow engine', () => {
  it('counts what a system handled over sending and drain together, not only what it did while sent to', () => {
    expect(handledPerSecond(flow)).toBeCloseTo(13_000 / 12.5, 9);
    expect(handledPerSecond(sqlite)).toBeCloseTo(2_600, 9);
  });

  it('prints each engine over the flow engine: events handled a second, and per CPU-second', () => {
    expect(versusFlowEngine([run('reference', { eventsPerSecond: 5_000, handled: 50_000, cpuSeconds: 8 }), flow, sqlite, postgres])).toEqual([
      '    events handled, sending and drain together, against the in-memory flow engine (Node-RED): ' +
        'engine, SQLite 2.50× (2,600 / 1,040 a second), 3.00× per CPU-second; engine, PostgreSQL 1.25× (1,300 / 1,040 a second), 1.50× per CPU-second',
    ]);
  });

  it('prints no such line without the flow engine, without an engine, or when the flow engine handled nothing', () => {
    expect(versusFlowEngine([sqlite, postgres])).toEqual([]);
    expect(versusFlowEngine([flow])).toEqual([]);
    expect(versusFlowEngine([run('flow', { eventsPerSecond: 0, handled: 0, cpuSeconds: 5 }), sqlite])).toEqual([]);
  });

  it('says how much of its backlog a system that fell behind did after sending stopped', () => {
    const behind = run('flow', { eventsPerSecond: 0, handled: 15_500, cpuSeconds: 20, drainSeconds: 10, backlogAtEnd: 29_386, leftAfterDrain: 13_888 });
    const lines = closedLoopLines([behind, sqlite], 10);

    expect(lines).toContain('    in-memory flow engine (Node-RED): 13,888 acknowledged events still not done 10.0 s after sending stopped (1,550 a second of the 29,386 waiting done meanwhile)');
    expect(lines.at(-1)).toMatch(/^ {4}events handled, sending and drain together, against the in-memory flow engine \(Node-RED\): engine, SQLite /);
  });

  it("judges the issue's goal: every engine handled more events a second end to end than the flow engine", () => {
    const goal = (closedLoop: ClosedLoopFigures[]) =>
      judgeTargets({ closedLoop, openLoop: [], backlog: [], startup: [], waiting: [] } as unknown as BenchResults).find((t) => t.target.startsWith('the goal'));

    expect(goal([flow, sqlite, postgres])).toMatchObject({ figure: "SQLite 2.50×, PostgreSQL 1.25× Node-RED's (1,040 a second)", verdict: 'met' });
    const slow = run('postgres', { eventsPerSecond: 900, handled: 9_000, cpuSeconds: 10 });
    expect(goal([flow, sqlite, slow])).toMatchObject({ figure: "SQLite 2.50×, PostgreSQL 0.87× Node-RED's (1,040 a second)", verdict: 'not met' });
    expect(goal([sqlite, postgres])).toMatchObject({ figure: '–', verdict: 'not measured' });
  });

  it("leaves the flow engine's memory out of the engine's peak RSS target", () => {
    const results = { closedLoop: [flow, sqlite, postgres], openLoop: [], backlog: [], startup: [], waiting: [] } as unknown as BenchResults;
    const rss = judgeTargets(results).find((t) => t.target.startsWith('engine peak RSS'));

    expect(rss).toMatchObject({ figure: 'highest 150 MB (e2e keep-alive sqlite), over 2 engine runs', verdict: 'met' });
  });
});

describe("PostgreSQL's backends, on intake as end to end", () => {
  it('prints their CPU an event handled and events per CPU-second of the engine and its backends together', () => {
    // 60,000 events handled for 6 CPU-seconds of the engine and 9 of its backends: 150 µs an event, 4,000 a CPU-second.
    const intake = { ...run('postgres', { eventsPerSecond: 6_000, handled: 60_000, cpuSeconds: 6 }), kind: 'intake', databaseCpuSeconds: 9, eventsPerCpuSecondWithDatabase: 60_000 / 15 } as ClosedLoopFigures;

    expect(backendsNote(intake)).toBe("its backends' CPU (the server's processes serving its database) 150 µs an event; 4,000 events per CPU-second of the engine and its backends together");
    expect(closedLoopLines([intake], 10)).toContain("    engine, PostgreSQL, its backends' CPU (the server's processes serving its database) 150 µs an event; 4,000 events per CPU-second of the engine and its backends together");
  });

  it('prints nothing where the backends were not measured (a server whose processes are not visible here, or SQLite)', () => {
    expect(backendsNote(postgres)).toBeUndefined();
    expect(closedLoopLines([postgres], 10).some((line) => line.includes('backends'))).toBe(false);
  });
});
