/**
 * The engine's domain errors. Engine code throws these (never HTTP exceptions);
 * the one exception filter maps them to a status and the service's error shape
 * `{"error":{"code","message","details?"}}`.
 */

export const ERROR_STATUS = {
  bad_request: 400,
  invalid_json: 400,
  invalid_event: 400,
  validation_failed: 400,
  unauthorized: 401,
  missing_signature: 401,
  invalid_signature: 401,
  not_found: 404,
  conflict: 409,
  rule_defined_in_file: 409,
  rule_id_taken: 409,
  not_retryable: 409,
  payload_too_large: 413,
  webhook_secret_not_configured: 503,
  shutting_down: 503,
  not_ready: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'DomainError';
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** Messages may quote what the caller sent (an id, a value): keep answers bounded whatever was sent. */
const MAX_MESSAGE = 500;

export function errorBody(code: string, message: string, details?: unknown) {
  const bounded = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
  return { error: details === undefined ? { code, message: bounded } : { code, message: bounded, details } };
}
