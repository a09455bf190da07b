/**
 * Loop protection (SPEC section 6). An event about a resource that an engine
 * action created or changed in the last 10 minutes is the engine's own doing:
 * "self-caused", one link deeper in the chain than the event whose action
 * touched the resource. Rules ignore self-caused events unless they opt in, and
 * a chain that reaches MAX_CHAIN_DEPTH links is cut: that event is loop_blocked
 * and nothing evaluates it. So a rule that feeds itself acts at most
 * MAX_CHAIN_DEPTH times for one outside event.
 */

export const SELF_CAUSED_WINDOW_MS = 10 * 60_000;

export interface ChainPosition {
  selfCaused: boolean;
  depth: number;
}

export function chainPosition(provenance: { depth: number; changedAt: string } | null, now: Date): ChainPosition {
  if (!provenance) return { selfCaused: false, depth: 0 };
  const age = now.getTime() - Date.parse(provenance.changedAt);
  if (!(age >= 0 && age <= SELF_CAUSED_WINDOW_MS)) return { selfCaused: false, depth: 0 };
  return { selfCaused: true, depth: provenance.depth + 1 };
}

export function isLoopBlocked(position: ChainPosition, maxChainDepth: number): boolean {
  return position.selfCaused && position.depth >= maxChainDepth;
}
