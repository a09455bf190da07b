import { createHash } from 'node:crypto';
import { actionRunId, withSeq } from './new-action-run.js';

describe('actionRunId', () => {
  const event = { seq: 41, id: 'evt_1' };

  it('is a version 8 UUID that stays the same for the same event, rule, position and item', () => {
    const id = actionRunId(event, 'rule', 2, 3);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(actionRunId({ ...event }, 'rule', 2, 3)).toBe(id);
  });

  it('is the same key an engine before session 33 made (SHA-256 through a Hash object), so a run re-created after an upgrade sends the same Idempotency-Key', () => {
    const hex = createHash('sha256').update('evt_1\u0000rule\u00002\u0000item 3').digest('hex');
    expect(actionRunId(event, 'rule', 2, 3)).toBe(`00000000-0029-8${hex.slice(0, 3)}-a${hex.slice(3, 6)}-${hex.slice(6, 18)}`);
  });

  it('differs when the event id, the rule, the position or the item differs', () => {
    const ids = [
      actionRunId(event, 'rule', 0),
      actionRunId({ seq: 41, id: 'evt_2' }, 'rule', 0),
      actionRunId(event, 'other', 0),
      actionRunId(event, 'rule', 1),
      actionRunId(event, 'rule', 0, 0),
      actionRunId(event, 'rule', 0, 1),
    ];
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("sorts runs in the order of their events' seq, so a batch's ids append to the index", () => {
    const seqs = [1, 9, 10, 255, 256, 70_000, 2 ** 40, 2 ** 47 + 5];
    const ids = seqs.map((seq, i) => actionRunId({ seq, id: `evt_${seqs.length - i}` }, 'z', 9 - i));
    expect([...ids].sort()).toEqual(ids);
    expect(actionRunId({ seq: 0x123456789abc, id: 'evt_1' }, 'rule', 0).slice(0, 13)).toBe('12345678-9abc');
  });

  it('is made before its event has a seq and given it after (withSeq), the same id as made with it', () => {
    for (const seq of [1, 41, 0xffff, 0x10000, 2 ** 31 - 1, 0x123456789abc]) {
      expect(withSeq(actionRunId({ seq: 0, id: 'evt_1' }, 'rule', 2, 3), seq)).toBe(actionRunId({ seq, id: 'evt_1' }, 'rule', 2, 3));
    }
  });
});
