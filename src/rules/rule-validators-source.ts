/**
 * The rule validators as code (Ajv's standalone output, CommonJS), with the
 * hash of the schema they were compiled from: written to
 * `dist/rule-validators.cjs` at build time (scripts/build-engine.mjs) and
 * loaded by rule-schema.ts instead of compiling the schema at every start.
 * Kept apart from rule-schema.ts so that the engine does not carry Ajv's code
 * generator for the standalone module.
 */
// A CommonJS module whose `default` is the generator (its types say so; Node's default import is the whole module).
import standalone from 'ajv/dist/standalone/index.js';
import { ruleSchemaAjv, schemaHash } from './rule-schema.js';

export function ruleValidatorsSource(schemaText: string): string {
  const code = standalone.default(ruleSchemaAjv(schemaText, { source: true }), { file: 'rule-file', rule: 'rule' });
  return `${code}\nexports.schemaHash = ${JSON.stringify(schemaHash(schemaText))};\n`;
}
