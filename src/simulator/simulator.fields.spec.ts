import { checkTaskFields, isIsoDate, TASK_DEFAULTS } from './simulator.fields.js';
import { SimError } from './simulator.http.js';

function problemOf(body: Record<string, unknown>): string | undefined {
  try {
    checkTaskFields(body);
    return undefined;
  } catch (error) {
    if (!(error instanceof SimError)) throw error;
    expect([error.status, error.code]).toEqual([400, 'validation_failed']);
    return error.message;
  }
}

describe(isIsoDate.name, () => {
  it.each([
    ['2026-11-30', true],
    ['2028-02-29', true],
    ['2026-02-29', false],
    ['2026-13-01', false],
    ['2026-11-31', false],
    ['2026-11-30T09:00:00Z', false],
    ['26-11-30', false],
    ['', false],
  ])('%j → %s', (value, expected) => {
    expect(isIsoDate(value)).toBe(expected);
  });
});

describe(checkTaskFields.name, () => {
  it.each<[string, Record<string, unknown>]>([
    ['no task field at all', {}],
    ['a due date', { due_date: '2026-11-30' }],
    ['a due date taken away', { due_date: null }],
    ...['low', 'normal', 'high', 'urgent'].map((priority): [string, Record<string, unknown>] => [`priority ${priority}`, { priority }]),
  ])('accepts %s', (_case, body) => {
    expect(problemOf(body)).toBeUndefined();
  });

  it.each([
    ['a date that does not exist', { due_date: '2026-02-30' }, 'due_date must be an ISO date such as 2026-11-30, or null (got "2026-02-30")'],
    ['a time stamp', { due_date: '2026-11-30T09:00:00Z' }, 'due_date must be an ISO date such as 2026-11-30, or null (got "2026-11-30T09:00:00Z")'],
    ['a number', { due_date: 20261130 }, 'due_date must be an ISO date such as 2026-11-30, or null (got 20261130)'],
    ['words', { due_date: 'tomorrow' }, 'due_date must be an ISO date such as 2026-11-30, or null (got "tomorrow")'],
    ['an unknown priority', { priority: 'critical' }, 'priority must be one of low, normal, high, urgent (got "critical")'],
    ['a priority in capitals', { priority: 'HIGH' }, 'priority must be one of low, normal, high, urgent (got "HIGH")'],
    ['a null priority', { priority: null }, 'priority must be one of low, normal, high, urgent (got null)'],
    ['a numeric priority', { priority: 1 }, 'priority must be one of low, normal, high, urgent (got 1)'],
  ])('refuses %s', (_case, body, message) => {
    expect(problemOf(body)).toBe(message);
  });

  it('defaults to no due date and normal priority', () => {
    expect(TASK_DEFAULTS).toEqual({ due_date: null, priority: 'normal' });
  });
});
