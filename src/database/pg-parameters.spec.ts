/**
 * The arrays pg-parameters.ts writes (binary, and as literals), read back by the real PostgreSQL server, against what
 * node-postgres itself sends for the same arrays.
 */
import pg from 'pg';
import { checkPostgres, postgresUrlForTests } from '../../test/support/databases.js';
import { arrayLiteral, arrayParameterTypes, binaryArray, pgParameter } from './pg-parameters.js';

const TEXTS = [
  null, 'a', '', 'NULL', 'null', 'b"c', 'back\\slash', '\\"', '{x,y}', 'a,b', ' spaced ', "it's", 'é ü 😀 中文',
  JSON.stringify({ id: 'evt-1', data: { task: { title: 'say "hi" \\ bye', tags: ['a', 'b'] } } }),
];

describe('PostgreSQL array parameters', () => {
  let client: pg.Client | undefined;
  beforeAll(async () => {
    if (!(await checkPostgres())) {
      if (process.env.REQUIRE_POSTGRES === '1') throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=1) but ${postgresUrlForTests} does not answer`);
      process.stderr.write('\n  SKIPPED: PostgreSQL array parameters: no server answers\n\n');
      return;
    }
    client = new pg.Client(postgresUrlForTests);
    await client.connect();
  });
  afterAll(() => client?.end());

  /** The array as the server reads it from `param`. */
  const readBack = async (type: string, param: unknown) => (await client!.query<{ a: unknown }>(`SELECT $1::${type} AS a`, [param])).rows[0]!.a;

  it.each([
    ['text[]', TEXTS],
    ['int[]', [1, -2, null, 0, 2_147_483_647]],
    ['bool[]', [true, false, null]],
    ['text[]', []],
    ['text[]', [null]],
  ])('writes a %s the server reads as node-postgres sends it', async (type, values) => {
    if (!client) return;
    const literal = arrayLiteral(values);
    expect(literal).toBeDefined();
    expect(await readBack(type, literal)).toEqual(values);
    expect(await readBack(type, literal)).toEqual(await readBack(type, values));
  });

  it('leaves to node-postgres what JSON would escape otherwise, and any other kind of element', async () => {
    for (const values of [['a\nb'], ['tab\there'], ['\u0001'], ['lone \ud800 surrogate'], [[1, 2]], [{ a: 1 }], [Number.NaN], [new Date(0)], [Buffer.from('x')]]) {
      expect(arrayLiteral(values)).toBeUndefined();
      expect(pgParameter(values)).toBe(values);
    }
    if (!client) return;
    // node-postgres itself writes these right: the newline stays a newline.
    expect(await readBack('text[]', pgParameter(['a\nb', 'c']))).toEqual(['a\nb', 'c']);
  });

  it('passes everything else on as it was, undefined as null', () => {
    const buffer = Buffer.from('x');
    expect(pgParameter(undefined)).toBeNull();
    expect(pgParameter(null)).toBeNull();
    expect(pgParameter('text')).toBe('text');
    expect(pgParameter(42)).toBe(42);
    expect(pgParameter(buffer)).toBe(buffer);
    expect(pgParameter(['a', 'b"'])).toBe('{"a","b\\""}');
  });

  describe('in binary', () => {
    const WIDE = [...TEXTS, 'a\nb', 'tab\there', '\u0001', '\u007f', 'x'.repeat(5_000), '"'.repeat(300)];

    it.each([
      ['text', TEXTS],
      ['text', WIDE],
      ['varchar', WIDE],
      ['int', [1, -2, null, 0, 2_147_483_647, -2_147_483_648]],
      ['bool', [true, false, null]],
      ['text', []],
      ['int', []],
      ['text', [null, null]],
    ])('writes a %s[] the server reads as node-postgres sends it', async (type, values) => {
      const [elementType] = arrayParameterTypes(`SELECT $1::${type}[]`);
      expect(elementType).toBeDefined();
      const binary = pgParameter(values, elementType);
      expect(Buffer.isBuffer(binary)).toBe(true);
      if (!client) return;
      expect(await readBack(`${type}[]`, binary)).toEqual(values);
      expect(await readBack(`${type}[]`, binary)).toEqual(await readBack(`${type}[]`, values));
    });

    it('is refused by the server for another element type than the cast says, so the cast decides', async () => {
      const [text] = arrayParameterTypes('SELECT $1::text[]');
      if (!client) return;
      await expect(readBack('varchar[]', binaryArray(['a'], text!))).rejects.toThrow(/element type/);
    });

    it('is left for the literal when an element is not of the type, or the cast names no type it knows', () => {
      const [text, int, bool] = arrayParameterTypes('SELECT $1::text[], $2::int[], $3::boolean[]');
      for (const [values, type] of [[[1], text], [['1'], int], [[1.5], int], [[2_147_483_648], int], [[-2_147_483_649], int], [[1], bool], [[{}], text]] as const) {
        expect(binaryArray(values, type!)).toBeUndefined();
        expect(pgParameter(values, type)).toEqual(arrayLiteral(values) ?? values);
      }
      expect(arrayParameterTypes('SELECT $1::jsonb[], $2, $3::text, $4::int8[], $5::constructor[]')).toEqual([undefined, undefined, undefined, undefined, undefined]);
    });

    it("reads each parameter's element type from its first cast", () => {
      const types = arrayParameterTypes('SELECT * FROM unnest($1::text[], $3::int[]) WHERE $2::bool[] IS NOT NULL AND x = ANY($3::text[]) AND $10::varchar[] = $10::varchar[]');
      expect(types[0]).toBe(25);
      expect(types[1]).toBe(16);
      expect(types[2]).toBe(23);
      expect(types[3]).toBeUndefined();
      expect(types[9]).toBe(1043);
    });

    it('lays the array out as array_send does', () => {
      const [int] = arrayParameterTypes('SELECT $1::int[]');
      const buffer = binaryArray([7, null], int!)!;
      const words = Array.from({ length: buffer.length / 4 }, (_, i) => buffer.readInt32BE(i * 4));
      // one dimension, has a NULL, int4, two elements from 1; then 4 bytes of 7, and a NULL
      expect(words).toEqual([1, 1, 23, 2, 1, 4, 7, -1]);
      const [text] = arrayParameterTypes('SELECT $1::text[]');
      const empty = binaryArray([], text!)!;
      expect(Array.from({ length: 3 }, (_, i) => empty.readInt32BE(i * 4))).toEqual([0, 0, 25]);
      expect(binaryArray(['é'], text!)!.subarray(20)).toEqual(Buffer.from([0, 0, 0, 2, 0xc3, 0xa9]));
    });
  });
});
