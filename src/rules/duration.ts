/**
 * ISO-8601 durations for `delay` steps (SPEC 11).
 *
 * Accepted: weeks alone (`P2W`), or days and a time part (`P3D`, `PT72H`,
 * `P1DT2H30M`, `PT15M`); the last unit written may carry a fraction with a dot
 * (`PT0.5S`, `PT1.5H`), rounded to whole milliseconds. Years and months are
 * refused: their length depends on the calendar and the time zone, so
 * "P1M" after January 31 has no single answer. A duration must be longer
 * than zero and at most 90 days (a waiting execution holds a row, not a
 * timer, but a rule that waits a season is almost always a mistake).
 */
import { renderTemplateValue, TemplateError, type TemplateContext } from './template.js';

export const MAX_DELAY_MS = 90 * 24 * 3_600_000;

export type ParsedDuration = { ok: true; ms: number } | { ok: false; message: string };
/** `duration`: the text the template rendered to (the literal itself when there is no template), e.g. for "waits PT72H". */
export type RenderedDuration =
  | { ok: true; ms: number; duration: string }
  | { ok: false; code: 'invalid_duration' | 'template_error'; message: string };

const EXAMPLES = 'an ISO-8601 duration such as PT15M, P3D or P1DT2H30M';
const NUMBER = String.raw`(\d+(?:\.\d+)?)`;
const WEEKS = new RegExp(`^P${NUMBER}W$`);
const DAYS_AND_TIME = new RegExp(`^P(?:${NUMBER}D)?(?:T(?:${NUMBER}H)?(?:${NUMBER}M)?(?:${NUMBER}S)?)?$`);
/** `P1Y`, `P2M`, `P1Y2M3D`: a year or month written before any `T`. */
const YEARS_OR_MONTHS = /^P[^T]*\d[YM]/;

const UNIT_MS = { W: 7 * 86_400_000, D: 86_400_000, H: 3_600_000, M: 60_000, S: 1_000 } as const;

/** The components in order, largest unit first; only the last one written may have a fraction. */
function toMs(parts: Array<[string | undefined, number]>): ParsedDuration {
  const written = parts.filter(([text]) => text !== undefined) as Array<[string, number]>;
  if (written.length === 0) return { ok: false, message: `"P" alone has no length; write ${EXAMPLES}` };
  if (written.slice(0, -1).some(([text]) => text.includes('.'))) {
    return { ok: false, message: 'only the smallest unit written may have a fraction, e.g. PT1H30.5M' };
  }
  return { ok: true, ms: Math.round(written.reduce((sum, [text, unit]) => sum + Number(text) * unit, 0)) };
}

function parseComponents(text: string): ParsedDuration {
  const weeks = WEEKS.exec(text);
  if (weeks) return toMs([[weeks[1], UNIT_MS.W]]);
  const match = DAYS_AND_TIME.exec(text);
  if (match && !text.endsWith('T')) {
    return toMs([[match[1], UNIT_MS.D], [match[2], UNIT_MS.H], [match[3], UNIT_MS.M], [match[4], UNIT_MS.S]]);
  }
  if (YEARS_OR_MONTHS.test(text)) {
    return { ok: false, message: `"${text}": years and months have no fixed length; write days (P30D) or weeks (P4W)` };
  }
  return { ok: false, message: `"${text}" is not ${EXAMPLES}` };
}

/** Parses a literal duration and checks its bounds (> 0, ≤ 90 days). */
export function parseDuration(text: string): ParsedDuration {
  const parsed = parseComponents(text);
  if (!parsed.ok) return parsed;
  if (parsed.ms <= 0) return { ok: false, message: `"${text}" must be longer than zero` };
  if (parsed.ms > MAX_DELAY_MS) return { ok: false, message: `"${text}" is longer than the maximum of 90 days (P90D)` };
  return parsed;
}

/** A delay's `params.duration` at run time: a literal, or a template yielding one. */
export function renderDuration(duration: unknown, context: TemplateContext): RenderedDuration {
  let value: unknown;
  try {
    value = renderTemplateValue(duration, context, 'params.duration');
  } catch (error) {
    if (error instanceof TemplateError) return { ok: false, code: 'template_error', message: error.message };
    throw error;
  }
  if (typeof value !== 'string') {
    return { ok: false, code: 'invalid_duration', message: `params.duration: must be ${EXAMPLES}, got ${JSON.stringify(value) ?? 'nothing'}` };
  }
  const text = value.trim();
  const parsed = parseDuration(text);
  return parsed.ok ? { ...parsed, duration: text } : { ok: false, code: 'invalid_duration', message: `params.duration: ${parsed.message}` };
}
