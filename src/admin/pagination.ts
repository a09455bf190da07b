/** Cursor pagination shared by every admin list: `limit` 1–500 (default 50), an opaque `cursor`. */
import { DomainError } from '../errors.js';

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export function parseLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 50;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 500) {
    throw new DomainError('validation_failed', 'limit must be a whole number from 1 to 500', [
      { path: 'limit', message: 'must be a whole number from 1 to 500' },
    ]);
  }
  return Number(raw);
}

export function encodeCursor(position: unknown): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

export function decodeCursor<T>(raw: string | undefined, isValid: (value: unknown) => value is T): T | undefined {
  if (raw === undefined || raw === '') return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (isValid(value)) return value;
  } catch {
    // fall through to the error below
  }
  throw new DomainError('validation_failed', 'cursor is not one this API gave out', [
    { path: 'cursor', message: 'must be a next_cursor value from an earlier answer' },
  ]);
}

/** Fetch `limit + 1` rows; the extra one only says whether there is a next page. */
export function toPage<R, T>(rows: R[], limit: number, view: (row: R) => T, positionOf: (row: R) => unknown): Page<T> {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  return {
    items: items.map(view),
    next_cursor: more ? encodeCursor(positionOf(items[items.length - 1])) : null,
  };
}
