/** mapLimit: at most `limit` at a time, every item once, and with `turnEvery` a turn of the event loop between chunks. */
import { mapLimit } from './map-limit.js';

describe('mapLimit', () => {
  it('runs every item once, never more than the limit at a time', async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await mapLimit([...Array(20).keys()], 3, async (item) => {
      most = Math.max(most, ++running);
      await new Promise((resolve) => setTimeout(resolve, item % 4));
      running--;
      done.push(item);
    });
    expect(done.sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
    expect(most).toBe(3);
  });

  it('lets I/O callbacks run between chunks of `turnEvery` items, and not within one', async () => {
    const seen: string[] = [];
    // An immediate (what a socket's callbacks are queued behind) set before the work begins.
    const io = () => setImmediate(() => seen.push('io'));
    io();
    await mapLimit([...Array(10).keys()], 2, async (item) => {
      seen.push(String(item));
      if (item === 5) io();
      await Promise.resolve(); // work that needs no I/O: microtasks only
    }, 4);
    expect(seen).toEqual(['0', '1', '2', '3', 'io', '4', '5', '6', '7', 'io', '8', '9']);
  });

  it('without `turnEvery` runs the whole list as microtasks, holding I/O back until the end', async () => {
    const seen: string[] = [];
    setImmediate(() => seen.push('io'));
    await mapLimit([...Array(10).keys()], 2, async (item) => {
      seen.push(String(item));
      await Promise.resolve();
    });
    seen.push('end');
    expect(seen.indexOf('io')).toBe(-1);
  });
});
