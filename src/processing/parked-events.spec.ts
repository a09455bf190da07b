import { ParkedEvents } from './parked-events.js';
import type { ClaimedEvent } from './work.js';

const event = (seq: number, held: boolean): ClaimedEvent => ({
  seq, event_id: `e${seq}`, type: 'task.created', resource_key: `task:${seq}`, payload: '{}', depth: 0, attempts: 0,
  ...(held ? { held: { scope: { kind: 'task', parent: 'project:A' }, receivedAt: '2026-01-01T00:00:00.000Z' } } : {}),
});

describe('events parked behind creates in flight', () => {
  it('keeps the held ones aside, oldest first, and gives back the others', () => {
    const parked = new ParkedEvents(250);
    const [a, b, c] = [event(1, true), event(2, false), event(3, true)];
    expect(parked.park([a, b, c])).toEqual([b]);
    expect(parked.all).toEqual([a, c]);
    expect(parked.size).toBe(2);
  });

  it('hands a parked event on once, whoever asks first; events never parked pass through', () => {
    const parked = new ParkedEvents(250);
    const [a, c] = [event(1, true), event(3, true)];
    parked.park([a, c]);
    const claimed = event(9, false);
    expect(parked.unpark([c, claimed])).toEqual([c, claimed]);
    expect(parked.unpark([c])).toEqual([]);
    expect(parked.all).toEqual([a]);
  });

  it('says whether an event of a scope is parked, for as long as one is', () => {
    const parked = new ParkedEvents(250);
    const inA = { kind: 'task', parent: 'project:A' };
    const [a, c] = [event(1, true), event(3, true)];
    expect(parked.holds(inA)).toBe(false);
    parked.park([a, c, event(2, false)]);
    expect({ a: parked.holds(inA), b: parked.holds({ kind: 'task', parent: 'project:B' }), none: parked.holds({ kind: 'task', parent: null }) })
      .toEqual({ a: true, b: false, none: false });
    parked.unpark([a]);
    parked.unpark([a]);
    expect(parked.holds(inA)).toBe(true);
    parked.unpark([c]);
    expect(parked.holds(inA)).toBe(false);
    parked.park([event(4, true)]);
    parked.clear();
    expect(parked.holds(inA)).toBe(false);
  });

  it('asks for a look no more often than it is told to, and only while some are parked', () => {
    const parked = new ParkedEvents(250);
    expect(parked.dueForALook(1_000)).toBe(false);
    parked.park([event(1, true)]);
    expect(parked.dueForALook(1_000)).toBe(true);
    expect(parked.dueForALook(1_100)).toBe(false);
    expect(parked.dueForALook(1_250)).toBe(true);
    parked.clear();
    expect(parked.dueForALook(2_000)).toBe(false);
  });
});
