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
  not_waiting: 409,
  payload_too_large: 413,
  webhook_secret_not_configured: 503,
  shutting_down: 503,
  not_ready: 503,
  storage_unavailable: 503,
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

  /** Seconds a caller should wait before trying again (the answer's Retry-After), when waiting helps. */
  get retryAfterSeconds(): number | undefined {
    return undefined;
  }
}

/** What kept a write from the database: the `kind` label of the storage metrics and answers. */
export type StorageFaultKind = 'disk_full' | 'read_only' | 'io_error' | 'unreachable';

/** How long a refused sender is asked to wait: about the workers' longest pause between tries. */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

/**
 * The database cannot take a write now (full disk, read-only file, I/O error,
 * PostgreSQL unreachable or refusing writes). Nothing of the write was kept, so
 * the caller may send it again. `outage` is the fault this refusal belongs to:
 * answering a request with it counts that request as refused
 * (database/storage-health.ts reports the count when the fault ends).
 */
export class StorageUnavailableError extends DomainError {
  constructor(
    readonly kind: StorageFaultKind,
    message: string,
    private readonly outage?: { refused(): void },
  ) {
    super('storage_unavailable', message);
    this.name = 'StorageUnavailableError';
  }

  override get retryAfterSeconds(): number {
    return STORAGE_RETRY_AFTER_SECONDS;
  }

  /** One request was answered with this refusal. */
  refused(): void {
    this.outage?.refused();
  }
}

/** Messages may quote what the caller sent (an id, a value): keep answers bounded whatever was sent. */
const MAX_MESSAGE = 500;

export function errorBody(code: string, message: string, details?: unknown) {
  const bounded = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
  return { error: details === undefined ? { code, message: bounded } : { code, message: bounded, details } };
}
