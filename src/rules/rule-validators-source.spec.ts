import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileValidators, precompiledValidators, readRuleSchemaText, type Validators } from './rule-schema.js';
import { ruleValidatorsSource } from './rule-validators-source.js';

const rule = (overrides: Record<string, unknown> = {}) => ({
  id: 'a-rule',
  on: 'task.completed',
  actions: [{ type: 'task.create', params: { project_id: 'prj_1', title: 'Review' } }],
  ...overrides,
});

/** Good and bad rules, each failing a different part of the schema (if/then, oneOf, refs, patterns, enums, arrays). */
const SAMPLES: unknown[] = [
  rule(),
  [rule(), rule({ id: 'b' })],
  rule({ id: 'Bad Id', colour: 'red' }),
  rule({ schedule: { cron: '* * * * *' } }),
  rule({ on: undefined }),
  rule({ conditions: { all: [{ fact: 'event', operator: 'like', value: 1 }, { any: [{ fact: '', operator: 'matches', value: 3 }] }] } }),
  rule({ actions: [{ type: 'delay', params: { duration: '' } }, { type: 'check' }, { type: 'task.update', params: {} }, { type: 'nope', params: {} }] }),
  rule({ options: { throttle: { limit: 0 }, debounce: { seconds: 90_000 }, cancelOn: [] } }),
  [rule(), 'not a rule', rule({ priority: 1.5 })],
  'text',
  null,
];

describe(ruleValidatorsSource.name, () => {
  // Inside the project, so that the module's require of Ajv's runtime finds node_modules.
  let dir: string;
  const schema = readRuleSchemaText();
  const write = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  beforeAll(() => {
    dir = mkdtempSync(join(process.cwd(), '.rule-validators-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gives, for every rule good or bad, the result and the errors of the schema compiled at run time', () => {
    const precompiled = precompiledValidators(schema, write('same.cjs', ruleValidatorsSource(schema)));
    expect(precompiled).toBeDefined();
    const compiled = compileValidators(schema);
    const outcome = (validators: Validators, which: keyof Validators, json: unknown) => {
      const valid = validators[which](json);
      return { valid, errors: validators[which].errors };
    };
    for (const which of ['file', 'rule'] as const) {
      for (const json of SAMPLES) expect(outcome(precompiled!, which, json)).toEqual(outcome(compiled, which, json));
    }
    // The samples reach the errors that carry their schema (verbose), which the messages read.
    expect(outcome(precompiled!, 'file', SAMPLES[2]).errors).toEqual(expect.arrayContaining([expect.objectContaining({ keyword: 'additionalProperties', parentSchema: expect.any(Object) })]));
  });

  it('is not used for another schema than the one it was made from, nor when it is missing or broken', () => {
    const other = schema.replace('"title": "Automation engine rule file"', '"title": "Another"');
    expect(other).not.toBe(schema);
    expect(precompiledValidators(schema, write('other.cjs', ruleValidatorsSource(other)))).toBeUndefined();
    expect(precompiledValidators(schema, join(dir, 'missing.cjs'))).toBeUndefined();
    expect(precompiledValidators(schema, write('broken.cjs', 'exports.file = ;'))).toBeUndefined();
    expect(precompiledValidators(schema, write('empty.cjs', `exports.schemaHash = "x";`))).toBeUndefined();
  });
});
