import { ACTION_TYPES } from '../actions/action-types.js';
import type { CliContext } from './cli-output.js';
import { parseArgs, rulesValidate, USAGE } from './rules-validate.js';

const FIXTURES = 'test/fixtures/rules';

function capture(overrides: Partial<CliContext> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const context: CliContext = { env: {}, stdout: (line) => out.push(line), stderr: (line) => err.push(line), color: false, ...overrides };
  return { context, out, err };
}

describe(rulesValidate.name, () => {
  describe('valid rules', () => {
    it('exits 0 with only the summary line', async () => {
      const { context, out, err } = capture();
      expect(await rulesValidate([`${FIXTURES}/valid`], context)).toBe(0);
      expect(out).toEqual(['2 files, 3 rules valid, 0 problems']);
      expect(err).toEqual([]);
    });

    it('validates a single file', async () => {
      const { context, out } = capture();
      expect(await rulesValidate([`${FIXTURES}/valid/single-rule.json`], context)).toBe(0);
      expect(out).toEqual(['1 file, 1 rule valid, 0 problems']);
    });

    it('passes on the example rules', async () => {
      const { context, out } = capture();
      expect(await rulesValidate(['rules'], context)).toBe(0);
      expect(out).toHaveLength(1);
      expect(out[0]).toMatch(/^\d+ files, \d+ rules valid, 0 problems$/);
    });
  });

  describe('invalid rules', () => {
    it('exits 1 with one file: json-path: message line per problem, then the summary', async () => {
      const { context, out } = capture();
      expect(await rulesValidate([`${FIXTURES}/mixed`], context)).toBe(1);
      const dir = `${FIXTURES}/mixed`;
      expect(out).toEqual([
        expect.stringMatching(new RegExp(`^${dir}/b-broken-json\\.json: \\$: invalid JSON: `)),
        `${dir}/c-array.json: $[1].actions[0].type: must be one of ${[...ACTION_TYPES, 'delay', 'check'].join(', ')} (did you mean "task.create"?)`,
        `${dir}/d-duplicate.json: $.id: duplicate rule id "good-one": already defined in ${dir}/a-good.json`,
        `${dir}/sub/e-unknown-property.json: $.condtions: unknown property "condtions" (did you mean "conditions"?)`,
        '5 files, 2 rules valid, 4 problems',
      ]);
    });
  });

  describe('which path', () => {
    it('reads RULES_DIR when no path is given', async () => {
      const { context, out } = capture({ env: { RULES_DIR: `${FIXTURES}/valid` } });
      expect(await rulesValidate([], context)).toBe(0);
      expect(out).toEqual(['2 files, 3 rules valid, 0 problems']);
    });

    it('defaults to ./rules', () => {
      expect(parseArgs([], {})).toEqual({ help: false, path: './rules' });
      expect(parseArgs([], { RULES_DIR: ' ' })).toEqual({ help: false, path: './rules' });
    });
  });

  describe('usage errors', () => {
    it('exits 2 with a clear message when the path does not exist', async () => {
      const { context, out, err } = capture();
      expect(await rulesValidate([`${FIXTURES}/nowhere`], context)).toBe(2);
      expect(out).toEqual([]);
      expect(err).toEqual([`rules:validate: path not found: ${FIXTURES}/nowhere`]);
    });

    it('exits 2 on an unknown option or a second path', async () => {
      for (const args of [['--strict'], ['a', 'b']]) {
        const { context, err } = capture();
        expect(await rulesValidate(args, context)).toBe(2);
        expect(err[1]).toBe(USAGE);
      }
    });

    it('prints the usage and exits 0 for --help', async () => {
      const { context, out } = capture();
      expect(await rulesValidate(['--help'], context)).toBe(0);
      expect(out).toEqual([USAGE]);
    });
  });

  describe('colours', () => {
    it('colours the file, the path and the summary when enabled', async () => {
      const { context, out } = capture({ color: true });
      await rulesValidate([`${FIXTURES}/mixed/c-array.json`], context);
      expect(out[0]).toMatch(/^\u001b\[1m.*c-array\.json\u001b\[22m: \u001b\[33m\$\[1\]\.actions\[0\]\.type\u001b\[39m: must be one of/);
      expect(out[1]).toBe('\u001b[31m1 file, 1 rule valid, 1 problem\u001b[39m');
    });

    it('writes plain text when disabled', async () => {
      const { context, out } = capture({ color: false });
      await rulesValidate([`${FIXTURES}/mixed/c-array.json`], context);
      expect(out.join('\n')).not.toContain('\u001b');
    });
  });
});
