/**
 * Structural validation of rule files against `rules/rule.schema.json`, the same
 * schema editors use through `$schema`. Ajv reports every failed keyword, which
 * for `oneOf` and `if`/`then` means several errors per mistake; they are
 * collapsed here into one plain message per location.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import type { ErrorObject } from 'ajv';
import { isStep, STEP_TYPES, type RuleProblem } from './rule.types.js';

/** `rules/rule.schema.json`: two levels up from both `src/rules/` and `dist/rules/`. */
export const RULE_SCHEMA_PATH = fileURLToPath(new URL('../../rules/rule.schema.json', import.meta.url));

/**
 * The validators compiled to code at build time (scripts/build-engine.mjs,
 * rule-validators-source.ts), in `dist/`: two levels up from `src/rules/`,
 * `dist/rules/` and `dist/bundle/` alike. Compiling the schema costs Ajv
 * about 150 ms at every start; loading its code, a few.
 */
export const PRECOMPILED_VALIDATORS_PATH = fileURLToPath(new URL('../../dist/rule-validators.cjs', import.meta.url));

/** A compiled validator, from Ajv at run time or from the precompiled module: both set `errors` as Ajv does. */
export type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

export interface Validators {
  file: Validate;
  rule: Validate;
}

let validators: Validators | undefined;

/**
 * The schema's text. Its absence is an incomplete installation, not a missing
 * rule file or RULES_DIR, and is said so (the error carries no `code`, which
 * callers read as about the path they were given).
 */
export function readRuleSchemaText(path = RULE_SCHEMA_PATH): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`the rule schema ${path} cannot be read (${(error as Error).message}): the engine's installation is incomplete`);
  }
}

/** The schema's JSON (as {@link readRuleSchemaText}). */
export function readRuleSchema(path = RULE_SCHEMA_PATH): object {
  return JSON.parse(readRuleSchemaText(path)) as object;
}

/** What the precompiled module records of the schema it was made from; it is used only for the same text. */
export function schemaHash(schemaText: string): string {
  return createHash('sha256').update(schemaText).digest('hex');
}

/**
 * An Ajv holding the rule schema as `rule-file` and one rule as `rule`, with
 * the options both validators are compiled with, at run time or to code.
 */
export function ruleSchemaAjv(schemaText: string, code?: { source: boolean }): Ajv {
  // verbose: errors carry their schema, used to suggest property names.
  const ajv = new Ajv({ allErrors: true, verbose: true, allowUnionTypes: true, code });
  ajv.addKeyword('enumDescriptions'); // VS Code annotation, no validation
  ajv.addSchema(JSON.parse(schemaText) as object, 'rule-file');
  ajv.addSchema({ $id: 'rule', $ref: 'rule-file#/definitions/rule' });
  return ajv;
}

/** The precompiled validators at `path` when they were made from `schemaText`; otherwise (missing, stale, broken) none. */
export function precompiledValidators(schemaText: string, path = PRECOMPILED_VALIDATORS_PATH): Validators | undefined {
  try {
    const compiled = createRequire(import.meta.url)(path) as Partial<Validators> & { schemaHash?: string };
    if (compiled.schemaHash !== schemaHash(schemaText) || !compiled.file || !compiled.rule) return undefined;
    return { file: compiled.file, rule: compiled.rule };
  } catch {
    return undefined; // compiled at run time instead: the same validators, only slower to make
  }
}

/** Both validators compiled by Ajv now. */
export function compileValidators(schemaText: string): Validators {
  const ajv = ruleSchemaAjv(schemaText);
  return { file: ajv.getSchema('rule-file')!, rule: ajv.getSchema('rule')! };
}

/** The validators, made on first use (precompiled when they match the schema), then kept. */
function ruleValidators(): Validators {
  if (validators === undefined) {
    const text = readRuleSchemaText();
    validators = precompiledValidators(text) ?? compileValidators(text);
  }
  return validators;
}

/** `$`, `$[2]`, `$.actions[0].type`, `$.params["odd key"]`. */
export function jsonPath(segments: ReadonlyArray<string | number>, index?: number): string {
  let path = index === undefined ? '$' : `$[${index}]`;
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(segment)) path += `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}

/** Pointer segments as path segments: indexes become numbers where the data is an array. */
function pointerSegments(pointer: string, data: unknown): Array<string | number> {
  if (pointer === '') return [];
  const segments: Array<string | number> = [];
  let node = data;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const isIndex = Array.isArray(node) && /^\d+$/.test(key);
    segments.push(isIndex ? Number(key) : key);
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
  }
  return segments;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

function suggestion(given: string, candidates: readonly string[]): string {
  const scored = candidates.map((candidate) => ({ candidate, distance: editDistance(given, candidate) }));
  const best = scored.sort((a, b) => a.distance - b.distance)[0];
  return best !== undefined && best.distance <= Math.max(1, Math.floor(given.length / 3)) ? ` (did you mean "${best.candidate}"?)` : '';
}

function requiredNames(branches: unknown): string[] | undefined {
  if (!Array.isArray(branches)) return undefined;
  const names = branches.map((branch: { required?: unknown }) =>
    Array.isArray(branch.required) && branch.required.length === 1 ? String(branch.required[0]) : undefined,
  );
  return names.every((name) => name !== undefined) ? (names as string[]) : undefined;
}

/** "exactly one of these properties", the only way the schema uses oneOf. */
function oneOfMessage(error: ErrorObject): string {
  const names = requiredNames(error.schema)?.map((name) => `"${name}"`) ?? [];
  const list = names.join(', ');
  if (Array.isArray(error.params.passingSchemas)) return `must have only one of ${list}`;
  return `must have one of ${list}`;
}

/** What a step (`delay`, `check`) must not have, said plainly instead of "unknown property". */
function stepPropertyMessage(name: string, parentSchema: unknown): string | undefined {
  const step = (parentSchema as { properties?: { type?: { const?: unknown } } } | undefined)?.properties?.type?.const;
  if (typeof step !== 'string' || !isStep(step)) return undefined;
  if (name === 'forEach') return `forEach applies to actions, not to a ${step} step`;
  if (step === 'check' && name === 'params') return 'a check step has no params; its test goes in "conditions"';
  return undefined;
}

/** The schema's action enum lists action types only (held against the registry); an entry may also be a step. */
function allowedValues(values: unknown[]): string[] {
  const allowed = values.map(String);
  return allowed.includes('task.create') ? [...allowed, ...STEP_TYPES] : allowed;
}

function messageFor(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      const known = Object.keys((error.parentSchema?.properties as object | undefined) ?? {});
      return stepPropertyMessage(name, error.parentSchema) ?? `unknown property "${name}"${suggestion(name, known)}`;
    }
    case 'enum': {
      const allowed = allowedValues(params.allowedValues as unknown[]);
      const hint = typeof error.data === 'string' ? suggestion(error.data, allowed) : '';
      return `must be one of ${allowed.join(', ')}${hint}`;
    }
    case 'type':
      return `must be ${String(params.type).split(',').join(' or ')}`;
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'required':
      return 'is required';
    case 'minItems':
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : (error.message ?? 'is invalid');
    case 'oneOf':
      return oneOfMessage(error);
    default:
      return error.message ?? 'is invalid';
  }
}

function locationOf(error: ErrorObject, data: unknown): Array<string | number> {
  const segments = pointerSegments(error.instancePath, data);
  // An unknown property is reported where it is written, a missing one where it belongs, not at the parent.
  if (error.keyword === 'additionalProperties') segments.push(String(error.params.additionalProperty));
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty));
  return segments;
}

/**
 * Drops the echoes: `if` failures, the branch errors under a `oneOf` already
 * summarised, and anything else said about a value of the wrong type. Schema
 * paths restart at each `$ref`, so the data location is part of the key.
 */
function usefulErrors(errors: readonly ErrorObject[]): ErrorObject[] {
  const branchKey = (error: ErrorObject) => `${error.instancePath}#${error.schemaPath}`;
  const summarised = errors.filter((error) => error.keyword === 'oneOf').map((error) => `${branchKey(error)}/`);
  const wrongType = new Set(errors.filter((error) => error.keyword === 'type').map((error) => error.instancePath));
  return errors.filter(
    (error) =>
      error.keyword !== 'if' &&
      !(wrongType.has(error.instancePath) && error.keyword !== 'type') &&
      !summarised.some((prefix) => branchKey(error).startsWith(prefix)),
  );
}

function toProblems(errors: readonly ErrorObject[], data: unknown, file: string, index?: number): RuleProblem[] {
  const seen = new Set<string>();
  const problems: RuleProblem[] = [];
  for (const error of usefulErrors(errors)) {
    const problem = { file, path: jsonPath(locationOf(error, data), index), message: messageFor(error) };
    const key = `${problem.path}\u0000${problem.message}`;
    if (!seen.has(key)) problems.push(problem);
    seen.add(key);
  }
  return problems;
}

/** Schema problems of a whole rule file: `json` is its content, one rule or an array of them. */
export function schemaProblems(json: unknown, file: string): RuleProblem[] {
  const validate = ruleValidators().file;
  return validate(json) ? [] : toProblems(validate.errors ?? [], json, file);
}

/** Schema problems of one rule; `index` is its position in an array file. */
export function ruleSchemaProblems(json: unknown, file: string, index?: number): RuleProblem[] {
  const validate = ruleValidators().rule;
  return validate(json) ? [] : toProblems(validate.errors ?? [], json, file, index);
}
