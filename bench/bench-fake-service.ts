/**
 * The service the actions go to in the end-to-end runs: a lean fake
 * (fake-service-worker.ts) in a worker thread, not the simulator, so that at
 * thousands of actions per second the fake's cost stays small and off the load
 * generator's event loop. The engine and the reference server are pointed at
 * the same fake in the same run.
 *
 * Each measured run begins a "run" with the id prefix of its events; the worker
 * writes each event's action arrival time into memory shared with this thread,
 * indexed by the event's position, so joining a webhook to its action costs
 * nothing while the clock runs.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { Cleanup } from './bench-cleanup.js';
import { COUNTER } from './fake-service-worker.js';

export interface ArrivalLog {
  /** Epoch ms at which the action for event `i` arrived; 0 while it has not. */
  readonly arrivals: Float64Array;
  arrived(): number;
  /** Actions that arrived a second time for the same event (sent twice). */
  duplicates(): number;
  /** Actions for events of no run in progress (e.g. a previous run's late ones). */
  strays(): number;
  /** Requests other than POST /v1/tasks. */
  other(): number;
}

export interface FakeService {
  /** Base address including /v1, as SERVICE_API_URL takes it. */
  url: string;
  /** From now on, actions titled `Follow-up <prefix><i>` are recorded at i (i < capacity). */
  beginRun(prefix: string, capacity: number): Promise<ArrivalLog>;
  close(): Promise<void>;
}

function arrivalLog(arrivalsBuffer: SharedArrayBuffer, countersBuffer: SharedArrayBuffer): ArrivalLog {
  const counters = new Int32Array(countersBuffer);
  return {
    arrivals: new Float64Array(arrivalsBuffer),
    arrived: () => Atomics.load(counters, COUNTER.arrived),
    duplicates: () => Atomics.load(counters, COUNTER.duplicates),
    strays: () => Atomics.load(counters, COUNTER.strays),
    other: () => Atomics.load(counters, COUNTER.other),
  };
}

function nextMessage(worker: Worker, type: string): Promise<{ type: string; port?: number }> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type: string; port?: number }) => {
      if (message.type !== type) return;
      worker.off('message', onMessage);
      worker.off('error', reject);
      resolve(message);
    };
    worker.on('message', onMessage);
    worker.once('error', reject);
  });
}

export async function startFakeService(cleanup: Cleanup): Promise<FakeService> {
  const worker = new Worker(new URL('./fake-service-worker.js', import.meta.url));
  const listening = nextMessage(worker, 'listening');
  let closed: Promise<void> | undefined;
  const close = () => (closed ??= (async () => {
    worker.postMessage({ type: 'close' });
    const exited = once(worker, 'exit').then(() => undefined);
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    await worker.terminate();
  })());
  cleanup.add('stop the fake service', close);
  const { port } = await listening;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    async beginRun(prefix, capacity) {
      const arrivals = new SharedArrayBuffer(8 * Math.max(1, capacity));
      const counters = new SharedArrayBuffer(4 * 4);
      const running = nextMessage(worker, 'running');
      worker.postMessage({ type: 'run', prefix, arrivals, counters });
      await running;
      return arrivalLog(arrivals, counters);
    },
    close,
  };
}
