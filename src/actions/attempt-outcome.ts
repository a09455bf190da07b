/**
 * One attempt of an action run, from the request to its outcome: send it with
 * the run's id as Idempotency-Key and classify the answer with the retry policy
 * (succeeded, retry at a time, failed for good). Knows nothing of storage.
 */
import { isoAfter, type Clock } from '../clock.js';
import type { ActionRunStatus } from '../database/action-run.entity.js';
import { decideAfterFailure, type Failure } from './retry-policy.js';
import type { ServiceClient, ServiceOutcome } from './service-client.js';
import type { ServiceRequest } from './service-operations.js';

/** What an attempt ended with, as the action run records it. */
export interface AttemptOutcome {
  status: Exclude<ActionRunStatus, 'pending' | 'running'>;
  request?: ServiceRequest;
  /** `request` as stored on the run already (JSON), when it was. */
  requestJson?: string;
  responseStatus?: number;
  response?: unknown;
  /** `response` as the service sent it, when it was JSON: stored as it came, not written out again. */
  responseJson?: string;
  errorCode?: string;
  errorMessage?: string;
  /** When to try again (status `retrying`). */
  nextAttemptAt?: string;
  /** How long the request to the service took. */
  seconds?: number;
}

export interface AttemptPolicy {
  /** This attempt's number, 1-based (the run's attempts so far, this one included). */
  attempt: number;
  maxAttempts: number;
  /** Read after the answer: a retry is due a delay after the attempt ended. */
  clock: Clock;
  random: () => number;
}

export async function sendAttempt(client: ServiceClient, request: ServiceRequest, idempotencyKey: string, policy: AttemptPolicy): Promise<AttemptOutcome> {
  const started = performance.now();
  const outcome = await client.send(request, idempotencyKey);
  const seconds = (performance.now() - started) / 1000;
  // classifySend's answer is a fresh object: completed in place rather than copied (this runs for every action).
  const result = classifySend(outcome, policy);
  result.request = request;
  result.seconds = seconds;
  return result;
}

/** The answer (or the network's failure) → succeeded, retrying at a time, or failed. */
export function classifySend(outcome: ServiceOutcome, policy: AttemptPolicy): AttemptOutcome {
  if (outcome.ok) return { status: 'succeeded', responseStatus: outcome.status, response: outcome.body, responseJson: outcome.bodyJson };
  const failed = {
    responseStatus: outcome.kind === 'http' ? outcome.status : undefined,
    errorCode: outcome.code,
    errorMessage: outcome.message,
  };
  return { ...failed, ...afterFailure(outcome, policy) };
}

/** Retry later (with the policy's delay) or give up. */
export function afterFailure(failure: Failure, { attempt, maxAttempts, clock, random }: AttemptPolicy): Pick<AttemptOutcome, 'status' | 'nextAttemptAt'> {
  const now = clock.now();
  const decision = decideAfterFailure(failure, attempt, maxAttempts, now, random);
  if (!decision.retry) return { status: 'failed' };
  return { status: 'retrying', nextAttemptAt: isoAfter(now, decision.delayMs) };
}
