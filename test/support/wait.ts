/**
 * Poll until a probe answers: the one implementation lives in src/wait.ts,
 * because the demo (shipped in dist/) needs it too and cannot import test/.
 *
 *   export async function waitUntil<T>(
 *     probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
 *     options?: { timeoutMs?: number; intervalMs?: number; what?: string },
 *   ): Promise<T>
 *
 * Resolves with the first truthy probe result; a probe that throws counts as
 * not yet; rejects after timeoutMs (default 10 000) with an Error naming `what`
 * and the last error or value seen.
 */
export { waitUntil, type WaitOptions } from '../../src/wait.js';
