import { createHash } from 'node:crypto';
import { MAX_NESTING, nestingDepth, opensAtMost, parseEnvelope, resourceKeyOf } from './envelope.js';
import { safeJsonParse } from '../json.js';

function anEvent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'evt_1',
    type: 'task.completed',
    created_at: '2024-05-06T10:00:00.000Z',
    data: { task: { id: 'tsk_1', project_id: 'prj_1', title: 'Write docs', status: 'completed' } },
    ...overrides,
  };
}

function raw(value: unknown): Buffer {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
}

function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The envelope of a body that must parse. */
function envelopeOf(body: Buffer) {
  const result = parseEnvelope(body);
  if (!result.ok) throw new Error(`expected ${body.toString()} to parse, got ${result.code}: ${result.message}`);
  return result;
}

describe(parseEnvelope.name, () => {
  describe('a valid event', () => {
    it('keeps every field of the envelope, and finds the resource it is about and what could have caused it', () => {
      const event = anEvent({ extra: { kept: true } });
      const body = raw(event);
      expect(parseEnvelope(body)).toEqual({ ok: true, envelope: event, resourceKey: 'task:tsk_1', scope: { kind: 'task', parent: 'project:prj_1' }, text: body.toString('utf8') });
    });

    it('accepts a type no rule knows about', () => {
      const { envelope } = envelopeOf(raw(anEvent({ type: 'invoice.paid.late' })));
      expect(envelope.type).toBe('invoice.paid.late');
    });

    it('gives an event without data an empty data object and no resource', () => {
      const result = envelopeOf(raw({ id: 'evt_2', type: 'ping' }));
      expect(result.envelope.data).toEqual({});
      expect(result.resourceKey).toBeNull();
    });

    it.each([
      ['200 characters', 'x'.repeat(200)],
      ['one character', 'x'],
    ])('accepts a type of %s', (_, type) => {
      expect(envelopeOf(raw(anEvent({ type }))).envelope.type).toBe(type);
    });

    it('accepts an id of 255 characters', () => {
      const id = 'e'.repeat(255);
      expect(envelopeOf(raw(anEvent({ id }))).envelope.id).toBe(id);
    });
  });

  describe('the id of an event without one', () => {
    it('is the SHA-256 hex of the raw body', () => {
      const body = raw(anEvent({ id: undefined }));
      expect(envelopeOf(body).envelope.id).toBe(sha256Hex(body));
    });

    it('depends on the exact bytes, whitespace included', () => {
      const event = anEvent({ id: undefined });
      const compact = envelopeOf(raw(event)).envelope.id;
      const pretty = envelopeOf(Buffer.from(JSON.stringify(event, null, 2))).envelope.id;
      expect(compact).not.toBe(pretty);
      expect(envelopeOf(raw(event)).envelope.id).toBe(compact);
    });
  });

  describe('bad input', () => {
    it.each<[string, string, 'invalid_json' | 'invalid_event']>([
      ['an empty body', '', 'invalid_json'],
      ['only whitespace', '  \n', 'invalid_json'],
      ['plain text', 'hello', 'invalid_json'],
      ['truncated JSON', '{"type":"task.created"', 'invalid_json'],
      ['a trailing comma', '{"type":"task.created",}', 'invalid_json'],
      ['single quotes', "{'type':'task.created'}", 'invalid_json'],
      ['an array', '[{"type":"task.created"}]', 'invalid_event'],
      ['an empty array', '[]', 'invalid_event'],
      ['a string', '"task.created"', 'invalid_event'],
      ['a number', '42', 'invalid_event'],
      ['a boolean', 'true', 'invalid_event'],
      ['null', 'null', 'invalid_event'],
      ['no type', JSON.stringify(anEvent({ type: undefined })), 'invalid_event'],
      ['an empty type', JSON.stringify(anEvent({ type: '' })), 'invalid_event'],
      ['a blank type', JSON.stringify(anEvent({ type: '   ' })), 'invalid_event'],
      ['a numeric type', JSON.stringify(anEvent({ type: 7 })), 'invalid_event'],
      ['a null type', JSON.stringify(anEvent({ type: null })), 'invalid_event'],
      ['an array type', JSON.stringify(anEvent({ type: ['task.created'] })), 'invalid_event'],
      ['a type of 201 characters', JSON.stringify(anEvent({ type: 'x'.repeat(201) })), 'invalid_event'],
      ['a numeric id', JSON.stringify(anEvent({ id: 42 })), 'invalid_event'],
      ['a null id', JSON.stringify(anEvent({ id: null })), 'invalid_event'],
      ['an empty id', JSON.stringify(anEvent({ id: '' })), 'invalid_event'],
      ['an object id', JSON.stringify(anEvent({ id: { value: 'evt_1' } })), 'invalid_event'],
      ['an id of 256 characters', JSON.stringify(anEvent({ id: 'e'.repeat(256) })), 'invalid_event'],
      ['data that is null', JSON.stringify(anEvent({ data: null })), 'invalid_event'],
      ['data that is an array', JSON.stringify(anEvent({ data: [] })), 'invalid_event'],
      ['data that is a string', JSON.stringify(anEvent({ data: 'task' })), 'invalid_event'],
      ['data that is a number', JSON.stringify(anEvent({ data: 1 })), 'invalid_event'],
    ])('rejects %s', (_, text, code) => {
      expect(parseEnvelope(Buffer.from(text))).toEqual({ ok: false, code, message: expect.any(String) });
    });

    it('names the field that is wrong', () => {
      expect(parseEnvelope(raw(anEvent({ type: undefined })))).toEqual(expect.objectContaining({ message: expect.stringContaining('event.type') }));
      expect(parseEnvelope(raw(anEvent({ id: 42 })))).toEqual(expect.objectContaining({ message: expect.stringContaining('event.id') }));
      expect(parseEnvelope(raw(anEvent({ data: [] })))).toEqual(expect.objectContaining({ message: expect.stringContaining('event.data') }));
    });

    it('parses bytes that are not UTF-8 without throwing', () => {
      const body = Buffer.concat([Buffer.from('{"type":"x","note":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
      const result = envelopeOf(body);
      expect(result.envelope.id).toBe(sha256Hex(body));
    });
  });

  describe('prototype pollution', () => {
    afterEach(() => {
      // If a test ever did pollute, do not let it leak into the others.
      delete (Object.prototype as Record<string, unknown>).polluted;
    });

    it.each([
      ['a top-level __proto__', '{"type":"x","__proto__":{"polluted":"yes"}}'],
      ['a __proto__ inside data', '{"type":"x","data":{"task":{"id":"t1","__proto__":{"polluted":"yes"}}}}'],
      ['a top-level constructor.prototype', '{"type":"x","constructor":{"prototype":{"polluted":"yes"}}}'],
      ['a constructor.prototype inside data', '{"type":"x","data":{"constructor":{"prototype":{"polluted":"yes"}}}}'],
      ['a __proto__ in an array element', '{"type":"x","data":{"items":[{"__proto__":{"polluted":"yes"}}]}}'],
    ])('accepts %s without polluting Object.prototype', (_, text) => {
      const result = envelopeOf(Buffer.from(text));
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect((result.envelope as Record<string, unknown>).polluted).toBeUndefined();
      expect((result.envelope.data as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('drops the __proto__ key instead of keeping it as an own property', () => {
      const { envelope } = envelopeOf(Buffer.from('{"type":"x","__proto__":{"polluted":"yes"},"data":{"__proto__":{"polluted":"yes"}}}'));
      expect(Object.prototype.hasOwnProperty.call(envelope, '__proto__')).toBe(false);
      expect(Object.prototype.hasOwnProperty.call(envelope.data, '__proto__')).toBe(false);
      expect(Object.getPrototypeOf(envelope)).toBe(Object.prototype);
    });

    it('keeps a harmless constructor field that has no prototype', () => {
      const { envelope } = envelopeOf(raw({ type: 'x', data: { constructor: { name: 'Ada' } } }));
      expect(envelope.data.constructor).toEqual({ name: 'Ada' });
    });
  });

  describe('deep nesting', () => {
    // Parsing itself is iterative, but later steps (snapshots, admin answers)
    // stringify recursively, so absurd depth is refused at the door.
    it.each([10_000, 100_000])('refuses an event nested %i levels deep as invalid_event', (depth) => {
      const text = `{"type":"deep","data":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
      expect(parseEnvelope(Buffer.from(text))).toMatchObject({ ok: false, code: 'invalid_event' });
    });

    it('refuses arrays nested 10,000 levels deep', () => {
      const text = `{"type":"deep","data":{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`;
      expect(parseEnvelope(Buffer.from(text))).toMatchObject({ ok: false, code: 'invalid_event' });
    });

    it(`accepts nesting up to ${MAX_NESTING} levels, brackets inside strings not counted`, () => {
      const inner = MAX_NESTING - 2;
      const text = `{"type":"deep","data":${'{"a":'.repeat(inner)}"[[[{{{\\"\\"}}"${'}'.repeat(inner)}}`;
      expect(envelopeOf(Buffer.from(text)).envelope.type).toBe('deep');
    });
  });

  describe(opensAtMost.name, () => {
    it.each([
      ['{}', 1, true],
      ['{}', 0, false],
      ['[[1],[2,[3]]]', 4, true],
      ['[[1],[2,[3]]]', 3, false],
      ['{"a":"{[{["}', 5, true],
      ['{"a":"{[{["}', 4, false],
      ['"just a string"', 0, true],
    ])('says whether %s opens at most %i brackets: %s', (text, limit, answer) => {
      expect(opensAtMost(text, limit)).toBe(answer);
    });

    it(`lets a wide but shallow event through to the exact count: more than ${MAX_NESTING} objects, two levels deep`, () => {
      const items = Array.from({ length: MAX_NESTING * 2 }, (_, i) => ({ i }));
      const text = JSON.stringify({ type: 'wide', data: { items } });
      expect(opensAtMost(text, MAX_NESTING)).toBe(false);
      expect(envelopeOf(Buffer.from(text)).envelope.data.items).toHaveLength(MAX_NESTING * 2);
    });
  });

  describe(nestingDepth.name, () => {
    it.each([
      ['{}', 1],
      ['[[1],[2,[3]]]', 3],
      ['{"a":"{[{["}', 1],
      ['{"a":"\\"","b":[{}]}', 3],
      ['"just a string"', 0],
    ])('counts %s as %i deep', (text, depth) => {
      expect(nestingDepth(text)).toBe(depth);
    });
  });
});

describe(resourceKeyOf.name, () => {
  it.each<[string, Record<string, unknown>, string | null]>([
    ['a task', { task: { id: 'tsk_1' } }, 'task:tsk_1'],
    ['a project', { project: { id: 'prj_1' } }, 'project:prj_1'],
    ['a user', { user: { id: 'usr_1' } }, 'user:usr_1'],
    ['a workflow run', { workflow_run: { id: 'run_1', workflow_id: 'wf_1', status: 'completed' } }, 'workflow_run:run_1'],
    ['a numeric id', { task: { id: 42 } }, 'task:42'],
    ['a task inside a project event, task first', { project: { id: 'prj_1' }, task: { id: 'tsk_1' } }, 'task:tsk_1'],
    ['a resource without an id', { task: { title: 'x' } }, null],
    ['a resource with a boolean id', { task: { id: true } }, null],
    ['a resource that is not an object', { task: 'tsk_1' }, null],
    ['a resource that is an array', { task: [{ id: 'tsk_1' }] }, null],
    ['an unknown kind', { invoice: { id: 'inv_1' } }, null],
    ['no resource at all', {}, null],
  ])('names %s', (_, data, expected) => {
    expect(resourceKeyOf(data)).toBe(expected);
  });

  it('caps the key at 300 characters', () => {
    expect(resourceKeyOf({ task: { id: 'x'.repeat(1_000) } })).toHaveLength(300);
  });
});

describe(safeJsonParse.name, () => {
  it('parses ordinary JSON', () => {
    expect(safeJsonParse('{"a":[1,"two",null,{"b":false}]}')).toEqual({ a: [1, 'two', null, { b: false }] });
  });

  it('throws on text that is not JSON', () => {
    expect(() => safeJsonParse('{nope}')).toThrow(SyntaxError);
  });

  it('removes __proto__ and constructor.prototype keys', () => {
    const value = safeJsonParse('{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":2}},"keep":1}') as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['keep']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
