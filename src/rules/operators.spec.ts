import { Engine } from 'json-rules-engine';
import { addExtraOperators, endsWith, isEmpty, isNotEmpty, matches, startsWith } from './operators.js';

describe('operators', () => {
  describe(matches.name, () => {
    it.each([
      ['Release 1.2', '^Release', true],
      ['Pre-Release', '^Release', false],
      ['bug #42', '#\\d+$', true],
      ['', '^$', true],
      [42, '^4', false],
      [null, '.*', false],
      [undefined, '.*', false],
      [['Release'], '^Release', false],
      ['Release', 42, false],
    ])('%p matches %p → %p', (factValue, pattern, expected) => {
      expect(matches(factValue, pattern)).toBe(expected);
    });

    it('gives the same answer on repeated use of a cached pattern', () => {
      expect([matches('abc', 'b'), matches('abc', 'b'), matches('xyz', 'b')]).toEqual([true, true, false]);
    });

    it('throws on a pattern that is not a regular expression, a bug in the rule', () => {
      expect(() => matches('abc', '(')).toThrow(SyntaxError);
    });
  });

  describe(startsWith.name, () => {
    it.each([
      ['Release 1.2', 'Release', true],
      ['Release 1.2', 'release', false],
      ['x', '', true],
      [12, '1', false],
      [undefined, 'a', false],
      ['abc', 1, false],
    ])('%p startsWith %p → %p', (factValue, prefix, expected) => {
      expect(startsWith(factValue, prefix)).toBe(expected);
    });
  });

  describe(endsWith.name, () => {
    it.each([
      ['report.pdf', '.pdf', true],
      ['report.pdf', '.doc', false],
      [{ name: 'a.pdf' }, '.pdf', false],
      [null, '.pdf', false],
      ['a.pdf', null, false],
    ])('%p endsWith %p → %p', (factValue, suffix, expected) => {
      expect(endsWith(factValue, suffix)).toBe(expected);
    });
  });

  describe('isEmpty and isNotEmpty', () => {
    it.each([
      ['null', null, true, false],
      ['undefined', undefined, true, false],
      ['empty string', '', true, false],
      ['empty array', [], true, false],
      ['empty object', {}, true, false],
      ['string', 'x', false, true],
      ['array', [0], false, true],
      ['object', { a: undefined }, false, true],
      ['number (not a container)', 0, false, false],
      ['boolean (not a container)', false, false, false],
    ])('%s', (_name, factValue, empty, notEmpty) => {
      expect(isEmpty(factValue)).toBe(empty);
      expect(isNotEmpty(factValue)).toBe(notEmpty);
    });
  });

  describe(addExtraOperators.name, () => {
    it('makes the operators usable in json-rules-engine conditions', async () => {
      const engine = addExtraOperators(new Engine([], { allowUndefinedFacts: true }));
      engine.addRule({
        conditions: {
          all: [
            { fact: 'title', operator: 'matches', value: '^Release' },
            { fact: 'title', operator: 'endsWith', value: '1.2' },
            { fact: 'tags', operator: 'isNotEmpty', value: true },
            { fact: 'missing', operator: 'isEmpty', value: true },
          ],
        },
        event: { type: 'matched' },
      });
      const { events } = await engine.run({ title: 'Release 1.2', tags: ['a'] });
      expect(events).toEqual([{ type: 'matched' }]);
    });
  });
});
