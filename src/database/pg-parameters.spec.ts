/**
 * The array literals pg-parameters.ts writes, read back by the real PostgreSQL server, against what node-postgres
 * itself sends for the same arrays.
 */
import pg from 'pg';
import { checkPostgres, postgresUrlForTests } from '../../test/support/databases.js';
import { arrayLiteral, pgParameter } from './pg-parameters.js';

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
});
