/**
 * Lookups for an evaluation made inside a commit (intake's, the outcomes':
 * EventProcessor.evaluateHere): none, as a call to the service has no place
 * there. Asked for one, the evaluation is not used, and the event loop
 * evaluates the event instead, lookups and all.
 */
import type { Lookups } from '../rules/facts.js';

export class NoLookups implements Lookups {
  asked = false;

  private refuse(): Promise<never> {
    this.asked = true;
    return Promise.reject(new Error('no lookups while a commit is open'));
  }

  project(): Promise<unknown> {
    return this.refuse();
  }

  user(): Promise<unknown> {
    return this.refuse();
  }

  tasks(): Promise<unknown[]> {
    return this.refuse();
  }
}
