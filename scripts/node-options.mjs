// Prints the options `npm start` gives the engine's node (package.json: `node $(node scripts/node-options.mjs) …`):
// those src/config/heap-growth.ts names for the database DATABASE_URL names (the young generation's bound differs
// between SQLite and PostgreSQL, and V8 reads it only when the heap is set up). Run after scripts/ensure-build.mjs.
import { engineNodeOptions } from '../dist/config/heap-growth.js';

process.stdout.write(engineNodeOptions(process.env.DATABASE_URL).join(' '));
