/** Admin request bodies: read with the size limit first, parsed safely, errors in the engine's shape. */
import type { Request } from 'express';
import { DomainError } from '../errors.js';
import { safeJsonParse } from '../json.js';
import { readBody } from './body.js';

export async function readJson(req: Request, limit: number, { optional = false } = {}): Promise<unknown> {
  const raw = await readBody(req, limit);
  if (raw.length === 0) {
    if (optional) return undefined;
    throw new DomainError('invalid_json', 'a JSON body is required');
  }
  try {
    return safeJsonParse(raw.toString('utf8'));
  } catch (error) {
    throw new DomainError('invalid_json', `body is not valid JSON: ${(error as Error).message}`);
  }
}

/** One entry per bad field, as every admin 400 answers them. */
export interface FieldProblem {
  path: string;
  message: string;
}

export function invalid(message: string, details: FieldProblem[]): DomainError {
  return new DomainError('validation_failed', message, details);
}
