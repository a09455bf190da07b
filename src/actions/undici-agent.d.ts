/**
 * undici's dispatcher alone (lib/dispatcher/agent.js, with the pool, client and
 * HTTP/1 parser it needs), imported by its path so that the bundle leaves out
 * the rest of undici (fetch, WebSocket, caches, mocks): 1.1 MB of source and
 * some 7 MB of memory at rest, kept by V8 for as long as the engine runs.
 */
declare module 'undici/lib/dispatcher/agent.js' {
  import type { Agent } from 'undici';
  const AgentClass: typeof Agent;
  export default AgentClass;
}
