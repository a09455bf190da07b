/**
 * Runs `work` for each item, at most `limit` at a time, in the items' order. With `turnEvery`, the items go that many
 * at a time, with a turn of the event loop between (what waits for I/O goes first): work that needs no I/O runs as
 * microtasks, which hold back every socket until the last item is done.
 */
export async function mapLimit<T>(items: T[], limit: number, work: (item: T) => Promise<void>, turnEvery = Infinity): Promise<void> {
  for (let start = 0; start < items.length; start += turnEvery) {
    if (start > 0) await new Promise(setImmediate);
    const chunk = items.slice(start, start + turnEvery);
    let next = 0;
    const lanes = Array.from({ length: Math.min(limit, chunk.length) }, async () => {
      while (next < chunk.length) await work(chunk[next++]);
    });
    await Promise.all(lanes);
  }
}
