/**
 * Rule action → the exact request it sends: params rendered with LiquidJS, then
 * shaped by the action type's handler. Shared by the action runner and by every
 * dry run (rule tests, backtests), so what a test shows is what would be sent.
 */
import type { RuleAction } from '../rules/rule.types.js';
import { ActionParamsError, handlerFor } from './action-types.js';
import type { ServiceRequest } from './service-operations.js';
import { compileParams, renderParams, TemplateError, type CompiledParams, type TemplateContext } from '../rules/template.js';

/** `json`: the request as stored on its run, when it was (recorded again with the outcome as it is, not serialized anew). */
export type RenderedRequest = { ok: true; request: ServiceRequest; json?: string } | { ok: false; errorCode: string; errorMessage: string };

const CACHE_SIZE = 2_000;
const compiledCache = new Map<string, CompiledParams>();

/** `cacheKey` names the rule version and position, so each action's params are parsed once. */
export function renderActionRequest(action: RuleAction, context: TemplateContext, cacheKey?: string): RenderedRequest {
  try {
    let compiled = cacheKey === undefined ? undefined : compiledCache.get(cacheKey);
    if (!compiled) {
      compiled = compileParams(action.params ?? {});
      if (cacheKey !== undefined) {
        if (compiledCache.size >= CACHE_SIZE) compiledCache.clear();
        compiledCache.set(cacheKey, compiled);
      }
    }
    const params = (renderParams(compiled, context) ?? {}) as Record<string, unknown>;
    return { ok: true, request: handlerFor(action.type).toRequest(params) };
  } catch (error) {
    if (error instanceof TemplateError || error instanceof ActionParamsError) {
      return { ok: false, errorCode: error.code, errorMessage: error.message };
    }
    throw error;
  }
}

/**
 * When nothing is sent (dry-run, tests), later actions still need an earlier
 * action's response: this is what the service would plausibly have answered.
 */
export function simulatedResponse(request: ServiceRequest, label: string): Record<string, unknown> {
  const body = typeof request.body === 'object' && request.body !== null ? request.body : {};
  return { id: `dry-run-${label}`, ...body, dry_run: true };
}
