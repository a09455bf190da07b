/** Events as the service sends them: factories, and signed delivery to the engine. */
import { randomUUID } from 'node:crypto';
import { signBody, type SignatureScheme } from '../../src/intake/signature.js';
import { TEST_SECRET } from './engine.js';

export interface TestEvent {
  id?: string;
  type: string;
  created_at?: string;
  data: Record<string, unknown>;
}

export function aTaskEvent(type: string, task: Record<string, unknown> = {}, extra: Partial<TestEvent> = {}): TestEvent {
  return {
    id: `evt_${randomUUID()}`,
    type,
    created_at: new Date().toISOString(),
    data: { task: { id: `tsk_${randomUUID().slice(0, 8)}`, project_id: 'prj_1', title: 'Write docs', status: 'open', ...task } },
    ...extra,
  };
}

export async function deliver(
  engineUrl: string,
  event: TestEvent | string,
  options: { secret?: string; scheme?: SignatureScheme; signature?: string | null } = {},
): Promise<Response> {
  const body = typeof event === 'string' ? event : JSON.stringify(event);
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  const signature = options.signature === undefined ? signBody(body, options.secret ?? TEST_SECRET, options.scheme) : options.signature;
  if (signature !== null) headers['X-Service-Signature'] = signature;
  return fetch(`${engineUrl}/webhooks`, { method: 'POST', headers, body });
}

/** The JSON body of an answer, loosely typed for assertions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function body(res: Response | Promise<Response>): Promise<any> {
  return (await res).json();
}
