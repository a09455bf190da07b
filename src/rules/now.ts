/**
 * The `now` fact and template value: an instant as local time in an IANA zone
 * (a rule's schedule timezone, UTC otherwise), so conditions and templates of
 * one rule agree on what "today" and "9 o'clock" mean.
 */
import { isoOf } from '../clock.js';

export interface NowFact {
  /** Local time with its UTC offset, e.g. `2024-05-06T12:00:00.000+02:00`. */
  iso: string;
  /** `YYYY-MM-DD` */
  date: string;
  /** 0-23 */
  hour: number;
  /** Monday = 1 … Sunday = 7 (ISO-8601) */
  weekday: number;
}

const WEEKDAYS: Record<string, number> = { Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6, Sun: 7 };
// Building an Intl.DateTimeFormat costs tens of microseconds: one per zone.
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', weekday: 'short', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

function formatOffset(minutes: number): string {
  if (minutes === 0) return 'Z';
  const abs = Math.abs(minutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  return `${minutes < 0 ? '-' : '+'}${hh}:${String(abs % 60).padStart(2, '0')}`;
}

/** UTC needs no time-zone database: the instant's own fields (most rules have no zone, and every template builds `now`). */
function utcNowFact(at: Date): NowFact {
  const iso = isoOf(at);
  return { iso, date: iso.slice(0, 10), hour: at.getUTCHours(), weekday: at.getUTCDay() || 7 };
}

/** The `now` fact for an instant, in an IANA time zone. Throws RangeError on an unknown zone. */
export function nowFact(at: Date, timeZone = 'UTC'): NowFact {
  if (timeZone === 'UTC') return utcNowFact(at);
  const part: Record<string, string> = {};
  for (const { type, value } of formatterFor(timeZone).formatToParts(at)) part[type] = value;
  const [year, month, day, hour, minute, second] = [part.year, part.month, part.day, part.hour, part.minute, part.second].map(Number);
  const ms = at.getUTCMilliseconds();
  const offset = Math.round((Date.UTC(year, month - 1, day, hour, minute, second, ms) - at.getTime()) / 60_000);
  const date = `${part.year}-${part.month}-${part.day}`;
  const iso = `${date}T${part.hour}:${part.minute}:${part.second}.${String(ms).padStart(3, '0')}${formatOffset(offset)}`;
  return { iso, date, hour, weekday: WEEKDAYS[part.weekday] };
}
