import type { LogLevel } from '../config/config.js';
import { JsonLogger, Redactor } from './json-logger.js';

const API_KEY = 'ac_live_0123456789abcdef';
const WEBHOOK_SECRET = 'whsec_rotating_secret';

/** A logger that writes into an array, and the parsed lines it wrote. */
function aLogger(level: LogLevel = 'debug', secrets: string[] = [API_KEY, WEBHOOK_SECRET]) {
  const lines: string[] = [];
  const logger = new JsonLogger(level, new Redactor(secrets), (line) => lines.push(line));
  const entries = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { logger, lines, entries };
}

describe(Redactor.name, () => {
  describe('configured secrets', () => {
    it.each([
      ['alone', API_KEY, '[redacted]'],
      ['inside a sentence', `calling with key ${API_KEY} now`, 'calling with key [redacted] now'],
      ['twice', `${API_KEY}/${API_KEY}`, '[redacted]/[redacted]'],
      ['in a URL', `https://h/v1?key=${API_KEY}&x=1`, 'https://h/v1?key=[redacted]&x=1'],
      ['next to another secret', `${API_KEY}${WEBHOOK_SECRET}`, '[redacted][redacted]'],
    ])('replaces a secret %s', (_, text, expected) => {
      expect(new Redactor([API_KEY, WEBHOOK_SECRET]).redact(text)).toBe(expected);
    });

    it('replaces the longest secret first, so a secret containing another goes whole', () => {
      const redactor = new Redactor(['abcd', 'abcdefgh']);
      expect(redactor.redact('x abcdefgh y abcd z')).toBe('x [redacted] y [redacted] z');
    });

    it('gives the same result whatever order the secrets come in', () => {
      const text = 'token=abcdefgh-and-abcd';
      expect(new Redactor(['abcd', 'abcdefgh']).redact(text)).toBe(new Redactor(['abcdefgh', 'abcd']).redact(text));
    });

    it('ignores secrets shorter than four characters, which would blank out ordinary words', () => {
      expect(new Redactor(['a', 'on', '']).redact('a person on a bus')).toBe('a person on a bus');
    });

    it('leaves text without secrets alone', () => {
      expect(new Redactor([API_KEY]).redact('nothing to see here')).toBe('nothing to see here');
    });
  });

  describe('bearer tokens', () => {
    it.each([
      ['Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc-def_ghi', 'Authorization: Bearer [redacted]'],
      ['Bearer   some.unknown~token+with/chars=', 'Bearer   [redacted]'],
      ['authorization: bearer lowercase-token-1234', 'authorization: bearer [redacted]'],
      ['"Bearer 0123456789" said the upstream', '"Bearer [redacted]" said the upstream'],
    ])('redacts %j, even for a token it was not told about', (text, expected) => {
      expect(new Redactor([]).redact(text)).toBe(expected);
    });

    it('leaves the word Bearer in prose alone', () => {
      expect(new Redactor([]).redact('Bearer of bad news')).toBe('Bearer of bad news');
    });
  });
});

describe(JsonLogger.name, () => {
  describe('one JSON object per line', () => {
    it('writes each entry as one line of JSON ending in a newline', () => {
      const { logger, lines } = aLogger();
      logger.log('first\nwith a newline inside', 'engine');
      logger.warn('second', 'engine');
      expect(lines).toHaveLength(2);
      for (const line of lines) {
        expect(line.endsWith('\n')).toBe(true);
        expect(line.slice(0, -1)).not.toContain('\n');
        expect(() => JSON.parse(line)).not.toThrow();
      }
    });

    it('records the time, level, context and message', () => {
      const { logger, entries } = aLogger();
      logger.log('engine started', 'engine');
      const [entry] = entries();
      expect(entry).toEqual({ time: expect.any(String), level: 'info', context: 'engine', msg: 'engine started' });
      expect(new Date(entry.time as string).toISOString()).toBe(entry.time);
    });

    it('merges an object message into the entry', () => {
      const { logger, entries } = aLogger();
      logger.log({ msg: 'event stored', eventId: 'evt_1', ms: 3 }, 'intake');
      expect(entries()[0]).toMatchObject({ level: 'info', context: 'intake', msg: 'event stored', eventId: 'evt_1', ms: 3 });
    });

    it('writes an Error message as its message', () => {
      const { logger, entries } = aLogger();
      logger.error(new Error('boom'), 'workers');
      expect(entries()[0]).toMatchObject({ level: 'error', msg: 'boom', context: 'workers' });
    });

    it('keeps the stack Nest passes before the context', () => {
      const { logger, entries } = aLogger();
      logger.error('unexpected error: boom', 'Error: boom\n    at f (file.ts:1:1)', 'http');
      expect(entries()[0]).toEqual({
        time: expect.any(String),
        level: 'error',
        context: 'http',
        msg: 'unexpected error: boom',
        stack: 'Error: boom\n    at f (file.ts:1:1)',
      });
    });

    it('still writes a line when the message cannot be serialised', () => {
      const { logger, entries } = aLogger();
      const circular: Record<string, unknown> = { msg: 'loop' };
      circular.self = circular;
      logger.log(circular, 'engine');
      expect(entries()).toEqual([{ msg: '[unserialisable log entry]' }]);
    });
  });

  describe('levels', () => {
    const methods = ['debug', 'verbose', 'log', 'warn', 'error'] as const;

    it.each<[LogLevel, Array<[string, string]>]>([
      ['debug', [['debug', 'via debug'], ['debug', 'via verbose'], ['info', 'via log'], ['warn', 'via warn'], ['error', 'via error']]],
      ['info', [['info', 'via log'], ['warn', 'via warn'], ['error', 'via error']]],
      ['warn', [['warn', 'via warn'], ['error', 'via error']]],
      ['error', [['error', 'via error']]],
    ])('at %s writes only entries of that level and above', (level, written) => {
      const { logger, entries } = aLogger(level);
      for (const method of methods) logger[method](`via ${method}`, 'engine');
      expect(entries().map((e) => [e.level, e.msg])).toEqual(written);
    });
  });

  describe("Nest's start-up chatter", () => {
    it.each(['InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestFactory'])('demotes log() from %s to debug', (context) => {
      const atInfo = aLogger('info');
      atInfo.logger.log('Mapped {/webhooks, POST} route', context);
      expect(atInfo.lines).toEqual([]);

      const atDebug = aLogger('debug');
      atDebug.logger.log('Mapped {/webhooks, POST} route', context);
      expect(atDebug.entries()).toEqual([expect.objectContaining({ level: 'debug', context })]);
    });

    it('keeps a warning from a chatty context at warn', () => {
      const { logger, entries } = aLogger('info');
      logger.warn('something odd', 'InstanceLoader');
      expect(entries()).toEqual([expect.objectContaining({ level: 'warn', context: 'InstanceLoader' })]);
    });

    it('keeps log() from other contexts at info', () => {
      const { logger, entries } = aLogger('info');
      logger.log('listening on port 3000', 'NestApplication');
      expect(entries()).toEqual([expect.objectContaining({ level: 'info', context: 'NestApplication' })]);
    });
  });

  describe('redaction', () => {
    it('redacts a secret in the message', () => {
      const { logger, lines } = aLogger();
      logger.log(`service answered 401 for key ${API_KEY}`, 'actions');
      expect(lines.join('')).not.toContain(API_KEY);
      expect(JSON.parse(lines[0]).msg).toBe('service answered 401 for key [redacted]');
    });

    it('redacts a secret in the fields of an object message, nested too', () => {
      const { logger, lines, entries } = aLogger();
      logger.warn({ msg: 'request failed', headers: { authorization: `Bearer ${API_KEY}` }, secret: WEBHOOK_SECRET }, 'actions');
      expect(lines.join('')).not.toContain(API_KEY);
      expect(lines.join('')).not.toContain(WEBHOOK_SECRET);
      expect(entries()[0]).toMatchObject({ headers: { authorization: 'Bearer [redacted]' }, secret: '[redacted]' });
    });

    it('redacts a secret in a stack trace', () => {
      const { logger, lines, entries } = aLogger();
      const error = new Error(`fetch failed for ${API_KEY}`);
      logger.error(error.message, error.stack, 'workers');
      expect(lines.join('')).not.toContain(API_KEY);
      expect(entries()[0].stack).toContain('fetch failed for [redacted]');
    });

    it('redacts a secret in an Error message', () => {
      const { logger, lines } = aLogger();
      logger.error(new Error(`bad signature with ${WEBHOOK_SECRET}`), 'intake');
      expect(lines.join('')).not.toContain(WEBHOOK_SECRET);
    });

    it('redacts an unknown bearer token', () => {
      const { logger, lines } = aLogger();
      logger.log('upstream echoed Authorization: Bearer some-other-token-123', 'actions');
      expect(lines.join('')).not.toContain('some-other-token-123');
    });

    it.each([
      ['a double quote', 'sec"ret-value'],
      ['a backslash', 'sec\\ret-value'],
      ['a tab', 'sec\tret-value'],
    ])('redacts a secret containing %s, which JSON escapes', (_, secret) => {
      const { logger, lines, entries } = aLogger('debug', [secret]);
      logger.log(`the secret is ${secret}`, 'engine');
      expect(entries()[0].msg).toBe('the secret is [redacted]');
      expect(lines.join('')).not.toContain(JSON.stringify(secret).slice(1, -1));
    });

    it('still writes valid JSON after redacting', () => {
      const { logger, lines } = aLogger();
      logger.log({ msg: `"${API_KEY}"`, list: [API_KEY, WEBHOOK_SECRET] }, 'engine');
      expect(JSON.parse(lines[0])).toMatchObject({ msg: '"[redacted]"', list: ['[redacted]', '[redacted]'] });
    });
  });
});
