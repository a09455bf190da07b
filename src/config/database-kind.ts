/**
 * Which database a DATABASE_URL names; database/data-source.ts re-exports it. A file of its own so that what needs only the
 * kind (the node options `npm start` gives the engine: config/heap-growth.ts) loads no TypeORM.
 */
export type DatabaseKind = 'sqlite' | 'postgres';

export function databaseKind(url: string): DatabaseKind {
  return url.startsWith('postgres') ? 'postgres' : 'sqlite';
}
