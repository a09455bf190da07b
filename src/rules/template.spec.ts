import * as fc from 'fast-check';
import { templateContext } from './template-context.js';
import {
  compileParams,
  renderParams,
  renderString,
  renderTemplateValue,
  renderWithLiquidJsOnly,
  TemplateError,
  type TemplateContext,
} from './template.js';

function makeContext(overrides: Partial<TemplateContext> = {}): TemplateContext {
  return {
    event: {
      id: 'evt_1',
      type: 'task.completed',
      data: { task: { id: 'tsk_1', title: 'Release 1.2', points: 5, done: true, due: null, tags: ['a', 'b'], project_id: 'prj_1' } },
    },
    rule: { id: 'follow-up', name: 'Follow-up' },
    now: { iso: '2024-05-06T10:00:00.000Z', hour: 10, weekday: 1 },
    actions: { review: { response: { id: 'tsk_9', assignee: { id: 'usr_1' } } } },
    ...overrides,
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function renderError(params: unknown, context = makeContext()): TemplateError {
  try {
    renderTemplateValue(params, context);
  } catch (error) {
    if (error instanceof TemplateError) return error;
    throw error;
  }
  throw new Error('expected a TemplateError');
}

describe('template', () => {
  describe('a string that is exactly one expression keeps the value type', () => {
    it.each([
      ['number', '{{ event.data.task.points }}', 5],
      ['boolean', '{{ event.data.task.done }}', true],
      ['null', '{{ event.data.task.due }}', null],
      ['array', '{{ event.data.task.tags }}', ['a', 'b']],
      ['object', '{{ actions.review.response.assignee }}', { id: 'usr_1' }],
      ['number after a filter', '{{ event.data.task.points | plus: 1 }}', 6],
      ['no spaces inside the braces', '{{event.data.task.points}}', 5],
      ['whitespace control inside the braces', '{{- event.data.task.points -}}', 5],
      ['string', '{{ event.data.task.title }}', 'Release 1.2'],
    ])('%s', (_name, template, expected) => {
      expect(renderTemplateValue({ value: template }, makeContext())).toEqual({ value: expected });
    });
  });

  describe('any text around the one expression, even whitespace, makes it text as LiquidJS renders it', () => {
    it.each([
      ['spaces on both sides', ' {{ event.data.task.points }} ', ' 5 '],
      ['a trailing newline', '{{ event.data.task.points }}\n', '5\n'],
      ['leading spaces and a newline', '  {{ event.data.task.points }}\n', '  5\n'],
      ['a leading tab before an object', '\t{{ actions.review.response.assignee }}', '\t[object Object]'],
      ['whitespace trimmed by {{- -}}', ' {{- event.data.task.points -}} ', '5'],
      ['a comment after it', '{{ event.data.task.done }}{% comment %}why{% endcomment %}', 'true'],
    ])('%s', (_name, template, expected) => {
      expect(renderTemplateValue({ value: template }, makeContext())).toEqual({ value: expected });
    });
  });

  describe('other strings render to strings', () => {
    it.each([
      ['mixed text', 'Review: {{ event.data.task.title }}', 'Review: Release 1.2'],
      ['two expressions', '{{ event.data.task.points }}{{ event.data.task.points }}', '55'],
      ['a number inside text', 'points={{ event.data.task.points }}', 'points=5'],
      ['tags', '{% if event.data.task.done %}done{% else %}open{% endif %}', 'done'],
      ['upcase', '{{ event.data.task.title | upcase }}', 'RELEASE 1.2'],
      ['default on a missing value', '{{ event.data.task.owner | default: "nobody" }}', 'nobody'],
      ['size', 'tags: {{ event.data.task.tags | size }}', 'tags: 2'],
      ['rule and now', '{{ rule.id }}@{{ now.hour }}', 'follow-up@10'],
      ['earlier action response', 'after {{ actions.review.response.id }}', 'after tsk_9'],
    ])('%s', (_name, template, expected) => {
      expect(renderTemplateValue(template, makeContext())).toBe(expected);
    });
  });

  describe('params', () => {
    it('renders strings deep inside objects and arrays and passes other values through', () => {
      const params = {
        id: 'wf_notify',
        count: 3,
        flag: false,
        nothing: null,
        input: { task_id: '{{ actions.review.response.id }}', list: ['{{ event.data.task.points }}', 'x', 7] },
      };
      expect(renderTemplateValue(params, makeContext())).toEqual({
        id: 'wf_notify',
        count: 3,
        flag: false,
        nothing: null,
        input: { task_id: 'tsk_9', list: [5, 'x', 7] },
      });
    });

    it('returns params without templates as they are', () => {
      const params = { title: 'plain', nested: { list: [1, 'two'] } };
      expect(renderTemplateValue(params, makeContext())).toBe(params);
    });

    it('keeps a "__proto__" key as a plain key', () => {
      const params = JSON.parse('{"__proto__": "{{ rule.id }}"}') as unknown;
      const rendered = renderTemplateValue(params, makeContext()) as Record<string, unknown>;
      expect(Object.getPrototypeOf(rendered)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(rendered, '__proto__')?.value).toBe('follow-up');
    });

    it('compiles once and renders against many contexts', () => {
      const compiled = compileParams({ title: 'Review: {{ event.data.task.title }}' });
      const other = makeContext({ event: { data: { task: { title: 'Other' } } } });
      expect(renderParams(compiled, makeContext())).toEqual({ title: 'Review: Release 1.2' });
      expect(renderParams(compiled, other)).toEqual({ title: 'Review: Other' });
    });
  });

  describe('errors', () => {
    it('names the variable and the param path of an undefined variable', () => {
      const error = renderError({ title: '{{ event.data.task.nme }}' });
      expect(error.code).toBe('template_error');
      expect(error.path).toBe('params.title');
      expect(error.message).toBe('params.title: undefined variable "event.data.task.nme"');
    });

    it('names array and nested paths', () => {
      expect(renderError({ input: { list: ['ok', 'x {{ nope }}'] } }).message).toBe(
        'params.input.list[1]: undefined variable "nope"',
      );
    });

    it('reports a syntax error at compile time with the param path', () => {
      expect(() => compileParams({ title: '{{ event.data | upcase' })).toThrow(TemplateError);
      expect(() => compileParams({ title: '{% if %}' })).toThrow(/^params\.title: /);
    });

    // strictFilters: a misspelt filter fails when the rule loads, never silently at run time.
    it.each([
      ['in an output', { title: '{{ rule.id | no_such_filter }}' }, 'params.title', 'no_such_filter'],
      ['after a known filter', { input: { note: 'x {{ rule.id | upcase | upcse }}' } }, 'params.input.note', 'upcse'],
      ['inside a tag', { list: ['{% if rule.id | shout %}y{% endif %}'] }, 'params.list[0]', 'shout'],
      ['in a single typed output', { points: '{{ event.data.task.points | plsu: 1 }}' }, 'params.points', 'plsu'],
    ])('rejects an unknown filter %s at compile time, naming its param path', (_name, params, path, filter) => {
      let error: unknown;
      try {
        compileParams(params);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(TemplateError);
      expect((error as TemplateError).path).toBe(path);
      expect((error as TemplateError).message).toMatch(new RegExp(`^${escapeRegExp(path)}: undefined filter: ${filter}, line:1, col:\\d+$`));
    });
  });

  describe('facts, item and index (SPEC 11)', () => {
    const at = new Date('2026-11-23T10:00:00Z');
    const event = { type: 'project.archived', data: { project: { id: 'prj_1' } } };

    it('reads facts.<name> given by the execution', () => {
      const context = templateContext({ id: 'r' }, event, at, {}, { facts: { project: { id: 'prj_1', name: 'Apollo' } } });
      expect(renderTemplateValue('{{ facts.project.name }}', context)).toBe('Apollo');
    });

    it('reads item and index inside a forEach action, index 0 included', () => {
      const context = templateContext({ id: 'r' }, event, at, {}, { item: { id: 'tsk_3' }, index: 0 });
      expect(renderTemplateValue({ id: '{{ item.id }}', n: '{{ index }}' }, context)).toEqual({ id: 'tsk_3', n: 0 });
    });

    it.each([
      ['{{ item.id }}', 'params: undefined variable "item"'],
      ['{{ index }}', 'params: undefined variable "index"'],
      ['{{ facts.project }}', 'params: undefined variable "facts.project"'],
    ])('fails %s outside a forEach action or without that fact', (template, message) => {
      expect(renderError(template, templateContext({ id: 'r' }, event, at)).message).toBe(message);
    });

    it('keeps the context of existing callers as it was', () => {
      expect(Object.keys(templateContext({ id: 'r' }, event, at, {}))).toEqual(['event', 'rule', 'now', 'actions']);
    });
  });

  describe('sandbox', () => {
    it.each([
      '{{ event.constructor }}',
      '{{ event.__proto__ }}',
      '{{ event.data.task.tags.constructor }}',
      '{{ event.data.task.title.constructor }}',
      '{{ constructor }}',
      '{{ __proto__ }}',
      '{{ process }}',
      '{{ process.env }}',
      '{{ globalThis }}',
      '{{ require }}',
      '{{ event.hasOwnProperty }}',
      '{{ actions.toString }}',
    ])('refuses %s', (template) => {
      expect(renderError({ value: template }).code).toBe('template_error');
    });

    it('never hands out a prototype member through a filter', () => {
      const rendered = renderTemplateValue('{{ event.data.task.tags | map: "constructor" }}', makeContext());
      expect(rendered).toEqual([undefined, undefined]);
    });

    it('does not let a template change the caller context', () => {
      const context = makeContext();
      renderTemplateValue(['{% increment event %}', '{% assign rule = 1 %}{{ rule }}'], context);
      expect(renderTemplateValue('{{ rule.id }}', context)).toBe('follow-up');
      expect((context.event as { id: string }).id).toBe('evt_1');
    });

    it.each(['{% include "secrets.txt" %}', '{% render "../package.json" %}', '{% layout "x" %}body'])(
      'has no file system: %s fails',
      (template) => {
        expect(() => compileParams({ body: template })).toThrow(TemplateError);
      },
    );

    it.each([
      ['a huge range', '{% for i in (1..100000000) %}x{% endfor %}'],
      ['nested loops', '{% for a in (1..5000) %}{% for b in (1..5000) %}{{ a }}{% endfor %}{% endfor %}'],
      ['a huge template', `${'{{ rule.id }}'.repeat(20_000)}`],
    ])('stops %s with a TemplateError', (_name, template) => {
      expect(renderError({ body: template }).code).toBe('template_error');
    });
  });

  describe(renderString.name, () => {
    it('renders to a string, even a single expression', () => {
      expect(renderString('{{ event.data.task.points }}', makeContext())).toBe('5');
      expect(renderString(' {{ event.data.task.project_id }} ', makeContext())).toBe(' prj_1 ');
    });

    it('returns a string without templates unchanged', () => {
      expect(renderString('fixed-key', makeContext())).toBe('fixed-key');
    });

    it('names the given path in errors', () => {
      expect(() => renderString('{{ event.x }}', makeContext(), 'options.throttle.key')).toThrow(
        'options.throttle.key: undefined variable "event.x"',
      );
    });
  });

  describe('properties', () => {
    const braceFree = fc.string({ unit: 'binary' }).filter((s) => !s.includes('{'));
    const templateish = fc.stringMatching(/^[a-z .|:"'{}%()\-0-9_[\]]{0,40}$/);
    const params = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        templateish,
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 4 }),
      ),
    })).value;

    it('returns strings without braces unchanged', () => {
      fc.assert(
        fc.property(braceFree, (s) => renderTemplateValue(s, makeContext()) === s && renderString(s, makeContext()) === s),
        { numRuns: 3000 },
      );
    });

    it('keeps the whitespace around one expression, as text', () => {
      const whitespace = fc.string({ unit: fc.constantFrom(' ', '\t', '\n', '\r'), maxLength: 4 });
      fc.assert(
        fc.property(whitespace, whitespace, (before, after) => {
          fc.pre(before + after !== '');
          return renderTemplateValue(`${before}{{ event.data.task.points }}${after}`, makeContext()) === `${before}5${after}`;
        }),
        { numRuns: 500 },
      );
    });

    it('renders plain variable paths without LiquidJS exactly as LiquidJS does, errors included', () => {
      const key = fc.constantFrom('id', 'title', 'size', 'first', 'last', 'n', 'ok', 'none', 'list', 'obj', 'toString', '__proto__', 'constructor', 'a-b');
      const leaf = fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }));
      const data = fc.letrec((tie) => ({
        node: fc.oneof({ depthSize: 'small' }, leaf, fc.dictionary(key, tie('node'), { maxKeys: 5 })),
      })).node;
      const root = fc.constantFrom('event', 'rule', 'now', 'actions', 'facts', 'item', 'index', 'other');
      const path = fc.tuple(root, fc.array(key, { maxLength: 3 })).map(([r, keys]) => [r, ...keys].join('.'));
      const output = fc.tuple(path, fc.constantFrom('', ' ', '  ', '\n')).map(([p, pad]) => `{{${pad}${p}${pad}}}`);
      const text = fc.stringMatching(/^[a-z :{}%-]{0,6}$/);
      const template = fc.array(fc.oneof(output, text), { minLength: 1, maxLength: 4 }).map((parts) => parts.join(''));
      const outcome = (render: () => unknown) => {
        try {
          return { value: render() };
        } catch (error) {
          if (!(error instanceof TemplateError)) throw error;
          return { error: error.message };
        }
      };
      fc.assert(
        fc.property(template, data, data, fc.option(fc.nat(3)), (source, event, facts, index) => {
          const context = makeContext({ event, facts: facts as Record<string, unknown>, ...(index !== null && { item: event, index }) });
          const params = { typed: source, text: ` ${source}` };
          expect(outcome(() => renderTemplateValue(params, context))).toEqual(outcome(() => renderWithLiquidJsOnly(params, context)));
        }),
        { numRuns: 3000 },
      );
    });

    it('throws nothing but TemplateError for any params', () => {
      fc.assert(
        fc.property(params, (value) => {
          try {
            renderTemplateValue(value, makeContext());
          } catch (error) {
            if (!(error instanceof TemplateError)) throw error;
          }
        }),
        { numRuns: 3000 },
      );
    });
  });
});
