import { CronJob, CronTime } from 'cron';
import { dueTick, scheduledFor, scheduleEventId, upcomingTicks } from './schedules.js';

/** `YYYY-MM-DD HH:mm` on the wall clock of `timeZone`. */
function wallClock(iso: string, timeZone: string): string {
  return new Intl.DateTimeFormat('sv-SE', {
    timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23',
  }).format(new Date(iso));
}

/** The ticks of `cron` that fall on one local calendar day, as local wall-clock times. */
function ticksOnLocalDay(cron: string, timeZone: string, day: string, enough = 3): string[] {
  // Start before the local day begins (noon UTC the day before) and take `enough` ticks to cover it.
  const from = new Date(Date.parse(`${day}T12:00:00Z`) - 86_400_000);
  return upcomingTicks(cron, timeZone, from, enough)
    .map((tick) => wallClock(tick, timeZone))
    .filter((local) => local.startsWith(day));
}

describe('schedules', () => {
  describe(scheduledFor.name, () => {
    it.each([
      ['exactly on the second', '2026-01-01T10:00:02.000Z', '2026-01-01T10:00:02.000Z'],
      ['a few milliseconds late', '2026-01-01T10:00:02.004Z', '2026-01-01T10:00:02.000Z'],
      ['almost a second late', '2026-01-01T10:00:02.999Z', '2026-01-01T10:00:02.000Z'],
      ['late across a minute and a day', '2026-12-31T23:59:59.250Z', '2026-12-31T23:59:59.000Z'],
    ])('names the tick a job fired for %s by flooring to the whole second', (_when, firedAt, tick) => {
      expect(scheduledFor(new Date(firedAt))).toBe(tick);
    });

    it('gives the same tick to replicas that fire a few milliseconds apart', () => {
      const replicas = ['2026-01-01T10:00:02.001Z', '2026-01-01T10:00:02.013Z', '2026-01-01T10:00:02.240Z'];
      expect(new Set(replicas.map((at) => scheduledFor(new Date(at))))).toEqual(new Set(['2026-01-01T10:00:02.000Z']));
    });
  });

  describe(scheduleEventId.name, () => {
    it('is schedule:<rule id>:<scheduled_for>, the same on every replica and after a restart', () => {
      expect(scheduleEventId('nightly-report', '2026-01-01T02:00:00.000Z')).toBe('schedule:nightly-report:2026-01-01T02:00:00.000Z');
      expect(scheduleEventId('nightly-report', scheduledFor(new Date('2026-01-01T02:00:00.120Z')))).toBe(
        scheduleEventId('nightly-report', scheduledFor(new Date('2026-01-01T02:00:00.180Z'))),
      );
    });

    it('differs between rules and between ticks', () => {
      const ids = [
        scheduleEventId('a', '2026-01-01T02:00:00.000Z'),
        scheduleEventId('b', '2026-01-01T02:00:00.000Z'),
        scheduleEventId('a', '2026-01-01T02:00:02.000Z'),
      ];
      expect(new Set(ids).size).toBe(3);
    });
  });

  describe(dueTick.name, () => {
    const planned = new Date('2026-01-01T10:00:02.000Z');
    it.each([
      ['on time', '2026-01-01T10:00:02.015Z', '2026-01-01T10:00:02.000Z'],
      ['late, but before the next tick', '2026-01-01T10:00:03.990Z', '2026-01-01T10:00:02.000Z'],
      ['stalled just past the next tick', '2026-01-01T10:00:04.015Z', '2026-01-01T10:00:04.000Z'],
      ['stalled past several ticks', '2026-01-01T10:00:11.500Z', '2026-01-01T10:00:10.000Z'],
    ])('is the planned tick or the latest one due: %s', (_when, now, tick) => {
      expect(dueTick(new CronTime('*/2 * * * * *', 'UTC'), undefined, planned, new Date(now)).toISOString()).toBe(tick);
    });

    it('counts ticks on the wall clock of the rule\'s time zone', () => {
      // 02:30 daily in New York: planned for Jan 1, the engine stalled until Jan 3 09:00 local (14:00 UTC).
      const due = dueTick(new CronTime('0 30 2 * * *', 'America/New_York'), 'America/New_York', new Date('2026-01-01T07:30:00.000Z'), new Date('2026-01-03T14:00:00.000Z'));
      expect(due.toISOString()).toBe('2026-01-03T07:30:00.000Z');
    });
  });

  describe(upcomingTicks.name, () => {
    it('lists the next ticks strictly after the start, seconds field included', () => {
      expect(upcomingTicks('*/2 * * * * *', undefined, new Date('2026-01-01T00:00:00.000Z'), 3)).toEqual([
        '2026-01-01T00:00:02.000Z', '2026-01-01T00:00:04.000Z', '2026-01-01T00:00:06.000Z',
      ]);
      expect(upcomingTicks('*/2 * * * * *', undefined, new Date('2026-01-01T00:00:01.500Z'), 1)).toEqual(['2026-01-01T00:00:02.000Z']);
    });

    it('reads a five-field expression in UTC when no time zone is given', () => {
      expect(upcomingTicks('30 2 * * *', undefined, new Date('2026-01-01T00:00:00Z'), 2)).toEqual([
        '2026-01-01T02:30:00.000Z', '2026-01-02T02:30:00.000Z',
      ]);
    });

    it('reads the expression on the wall clock of the rule’s time zone, winter and summer', () => {
      // 09:00 in Berlin is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST).
      expect(upcomingTicks('0 9 * * *', 'Europe/Berlin', new Date('2026-01-15T00:00:00Z'), 1)).toEqual(['2026-01-15T08:00:00.000Z']);
      expect(upcomingTicks('0 9 * * *', 'Europe/Berlin', new Date('2026-07-15T00:00:00Z'), 1)).toEqual(['2026-07-15T07:00:00.000Z']);
    });

    it('keeps the weekday of the local day, not the UTC day', () => {
      // Monday 00:30 in Tokyo is still Sunday in UTC.
      const [tick] = upcomingTicks('30 0 * * 1', 'Asia/Tokyo', new Date('2026-01-01T00:00:00Z'), 1);
      expect(tick).toBe('2026-01-04T15:30:00.000Z');
      expect(wallClock(tick, 'Asia/Tokyo')).toBe('2026-01-05 00:30');
    });

    it('predicts what the running cron job will do', () => {
      const job = CronJob.from({ cronTime: '30 2 * * *', timeZone: 'Europe/Berlin', start: false, onTick: () => undefined });
      const expected = job.nextDates(3).map((d) => d.toJSDate().toISOString());
      expect(upcomingTicks('30 2 * * *', 'Europe/Berlin', new Date(), 3)).toEqual(expected);
    });

    describe('across daylight-saving changes in Europe/Berlin', () => {
      // 2026-03-29: clocks jump from 02:00 CET to 03:00 CEST; 02:30 does not exist that day.
      // 2026-10-25: clocks fall back from 03:00 CEST to 02:00 CET; 02:30 happens twice.

      it('runs a 02:30 job once on the spring-forward day, at 03:00 when the clock jumps over 02:30', () => {
        expect(ticksOnLocalDay('30 2 * * *', 'Europe/Berlin', '2026-03-28')).toEqual(['2026-03-28 02:30']);
        expect(ticksOnLocalDay('30 2 * * *', 'Europe/Berlin', '2026-03-29')).toEqual(['2026-03-29 03:00']);
        expect(ticksOnLocalDay('30 2 * * *', 'Europe/Berlin', '2026-03-30')).toEqual(['2026-03-30 02:30']);
        expect(upcomingTicks('30 2 * * *', 'Europe/Berlin', new Date('2026-03-28T12:00:00Z'), 2)).toEqual([
          '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z',
        ]);
      });

      it('runs a 02:30 job once on the fall-back day, at the first 02:30 (summer time)', () => {
        expect(ticksOnLocalDay('30 2 * * *', 'Europe/Berlin', '2026-10-25')).toEqual(['2026-10-25 02:30']);
        expect(upcomingTicks('30 2 * * *', 'Europe/Berlin', new Date('2026-10-24T12:00:00Z'), 2)).toEqual([
          '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z',
        ]);
      });

      it('runs an hourly job 23 times on the spring-forward day and 25 times on the fall-back day', () => {
        const spring = ticksOnLocalDay('0 * * * *', 'Europe/Berlin', '2026-03-29', 40);
        expect(spring).toHaveLength(23);
        expect(spring).not.toContain('2026-03-29 02:00');
        const fall = ticksOnLocalDay('0 * * * *', 'Europe/Berlin', '2026-10-25', 40);
        expect(fall).toHaveLength(25);
        expect(fall.filter((t) => t === '2026-10-25 02:00')).toHaveLength(2);
        expect(ticksOnLocalDay('0 * * * *', 'Europe/Berlin', '2026-10-26', 40)).toHaveLength(24);
      });

      it('keeps an hourly job one real hour apart through both changes', () => {
        for (const from of ['2026-03-28T22:30:00Z', '2026-10-24T21:30:00Z']) {
          const ticks = upcomingTicks('0 * * * *', 'Europe/Berlin', new Date(from), 30).map(Date.parse);
          const gaps = new Set(ticks.slice(1).map((t, i) => t - ticks[i]));
          expect([...gaps]).toEqual([3_600_000]);
        }
      });
    });
  });
});
