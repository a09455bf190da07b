import { MAX_DELAY_MS, parseDuration, renderDuration } from './duration.js';
import { templateContext } from './template-context.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe('duration', () => {
  describe(parseDuration.name, () => {
    it.each([
      ['PT15M', 15 * MINUTE],
      ['P3D', 3 * DAY],
      ['PT72H', 72 * HOUR],
      ['P1DT2H30M', DAY + 2 * HOUR + 30 * MINUTE],
      ['PT0.5S', 500],
      ['PT1.5H', 90 * MINUTE],
      ['PT10S', 10_000],
      ['P2W', 14 * DAY],
      ['P90D', MAX_DELAY_MS],
      ['PT2160H', MAX_DELAY_MS],
    ])('reads %s as %d ms', (text, ms) => {
      expect(parseDuration(text)).toEqual({ ok: true, ms });
    });

    it.each([
      ['P1M', '"P1M": years and months have no fixed length; write days (P30D) or weeks (P4W)'],
      ['P1Y', '"P1Y": years and months have no fixed length; write days (P30D) or weeks (P4W)'],
      ['P1Y2M3DT4H', '"P1Y2M3DT4H": years and months have no fixed length; write days (P30D) or weeks (P4W)'],
      ['P', '"P" alone has no length; write an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['PT', '"PT" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['P1DT', '"P1DT" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['15m', '"15m" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['pt15m', '"pt15m" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['-PT1M', '"-PT1M" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['P1W2D', '"P1W2D" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['PT1,5S', '"PT1,5S" is not an ISO-8601 duration such as PT15M, P3D or P1DT2H30M'],
      ['PT1.5H30M', 'only the smallest unit written may have a fraction, e.g. PT1H30.5M'],
      ['PT0S', '"PT0S" must be longer than zero'],
      ['P0D', '"P0D" must be longer than zero'],
      ['PT0.0004S', '"PT0.0004S" must be longer than zero'],
      ['P91D', '"P91D" is longer than the maximum of 90 days (P90D)'],
      ['P90DT1S', '"P90DT1S" is longer than the maximum of 90 days (P90D)'],
      ['P13W', '"P13W" is longer than the maximum of 90 days (P90D)'],
    ])('refuses %s: %s', (text, message) => {
      expect(parseDuration(text)).toEqual({ ok: false, message });
    });
  });

  describe(renderDuration.name, () => {
    const context = templateContext({ id: 'sla' }, { type: 'task.created', data: { wait: 'PT2H', minutes: 5, task: {} } }, new Date('2026-11-23T10:00:00Z'));

    it('takes a literal as written', () => {
      expect(renderDuration('PT15M', context)).toEqual({ ok: true, ms: 15 * MINUTE, duration: 'PT15M' });
    });

    it('renders a template yielding a duration', () => {
      expect(renderDuration('{{ event.data.wait }}', context)).toEqual({ ok: true, ms: 2 * HOUR, duration: 'PT2H' });
      expect(renderDuration('PT{{ event.data.minutes }}M', context)).toEqual({ ok: true, ms: 5 * MINUTE, duration: 'PT5M' });
    });

    it.each([
      ['{{ event.data.minutes }}', 'invalid_duration', 'params.duration: must be an ISO-8601 duration such as PT15M, P3D or P1DT2H30M, got 5'],
      ['{{ event.data.task }}', 'invalid_duration', 'params.duration: must be an ISO-8601 duration such as PT15M, P3D or P1DT2H30M, got {}'],
      [42, 'invalid_duration', 'params.duration: must be an ISO-8601 duration such as PT15M, P3D or P1DT2H30M, got 42'],
      [undefined, 'invalid_duration', 'params.duration: must be an ISO-8601 duration such as PT15M, P3D or P1DT2H30M, got nothing'],
      ['P{{ event.data.minutes }}M', 'invalid_duration', 'params.duration: "P5M": years and months have no fixed length; write days (P30D) or weeks (P4W)'],
      ['P1{{ event.data.minutes }}0D', 'invalid_duration', 'params.duration: "P150D" is longer than the maximum of 90 days (P90D)'],
      ['{{ event.data.missing }}', 'template_error', 'params.duration: undefined variable "event.data.missing"'],
    ])('refuses %p with %s', (duration, code, message) => {
      expect(renderDuration(duration, context)).toEqual({ ok: false, code, message });
    });
  });
});
