/**
 * Checks a real answer against the OpenAPI document that promised it: the
 * operation exists (a concrete path such as `/admin/events/evt_1` matches the
 * template `/admin/events/{id}`), the status is declared, and the body is valid
 * against the declared response schema. Schemas are validated with Ajv, `$ref`s
 * resolving into `components/schemas`.
 *
 * The document is OpenAPI 3.0, whose schemas are not quite JSON Schema:
 * `nullable: true` is turned into "or null" before Ajv sees them.
 */
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';

type Json = Record<string, unknown>;

interface MediaType {
  schema?: Json;
}

interface ResponseObject {
  description?: string;
  content?: Record<string, MediaType>;
}

interface OperationObject {
  responses?: Record<string, ResponseObject>;
}

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, Json> };
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);
const COMPONENTS_ID = 'https://engine.test/openapi-components.json';

/** OpenAPI 3.0 schema → JSON Schema: `nullable` becomes a null alternative; refs point at the shared components. */
function toJsonSchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toJsonSchema);
  if (value === null || typeof value !== 'object') return value;
  const { nullable, ...rest } = value as Json;
  const converted: Json = {};
  for (const [key, item] of Object.entries(rest)) {
    if (key === '$ref' && typeof item === 'string' && item.startsWith('#/components/')) {
      converted[key] = `${COMPONENTS_ID}${item}`;
    } else {
      converted[key] = toJsonSchema(item);
    }
  }
  return nullable === true ? { anyOf: [converted, { type: 'null' }] } : converted;
}

/** One Ajv per document, with its components registered once, and each response schema compiled once. */
class DocumentChecker {
  private readonly ajv: Ajv;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly routes: Array<{ template: string; pattern: RegExp; literalSegments: number }>;

  constructor(private readonly document: OpenApiDocument) {
    // strict: false, because OpenAPI adds keywords of its own (example, xml, discriminator, …).
    this.ajv = new Ajv({ strict: false, allErrors: true });
    ajvFormats.default(this.ajv);
    this.ajv.addSchema({ $id: COMPONENTS_ID, components: toJsonSchema(document.components ?? {}) } as AnySchema);
    this.routes = Object.keys(document.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.split('/').map((segment) => (/^\{[^}]+\}$/.test(segment) ? '[^/]+' : escapeRegExp(segment))).join('/')}$`),
      literalSegments: template.split('/').filter((segment) => !segment.startsWith('{')).length,
    }));
  }

  /** The path template of the operation a request reaches, e.g. `/admin/events/{id}`. */
  template(method: string, concretePath: string): string | undefined {
    const lower = method.toLowerCase();
    if (!METHODS.has(lower)) return undefined;
    const path = concretePath.split('?')[0].split('#')[0];
    // The most literal template wins: /admin/rules/validate before /admin/rules/{id}.
    return this.routes
      .filter((candidate) => candidate.pattern.test(path) && this.document.paths[candidate.template][lower] !== undefined)
      .sort((a, b) => b.literalSegments - a.literalSegments)[0]?.template;
  }

  problems(method: string, concretePath: string, status: number, body: unknown): string[] {
    const template = this.template(method, concretePath);
    if (template === undefined) {
      return [`${method.toUpperCase()} ${concretePath} ${status}: the document has no operation ${method.toUpperCase()} matching ${concretePath.split('?')[0]}`];
    }
    const responses = this.document.paths[template][method.toLowerCase()].responses ?? {};
    const declared = responseFor(responses, status);
    const label = `${method.toUpperCase()} ${template} ${status}`;
    if (declared === undefined) {
      return [`${label}: status ${status} is not declared (declared: ${Object.keys(responses).join(', ') || 'none'})`];
    }
    return this.bodyProblems(label, declared, body);
  }

  private bodyProblems(label: string, [key, response]: [string, ResponseObject], body: unknown): string[] {
    const media = response.content?.['application/json'] ?? Object.values(response.content ?? {})[0];
    if (media?.schema === undefined) {
      return body === undefined ? [] : [`${label}: the answer has a body, but the document declares none`];
    }
    if (body === undefined) return [`${label}: the answer has no body, but the document declares one`];
    const validate = this.validator(`${label}|${key}`, media.schema);
    if (validate(body)) return [];
    return (validate.errors ?? []).map((error) => `${label}: body${error.instancePath || ''} ${error.message ?? 'is invalid'}${describeParams(error.params)}`);
  }

  private validator(key: string, schema: Json): ValidateFunction {
    let validate = this.validators.get(key);
    if (validate === undefined) {
      validate = this.ajv.compile(toJsonSchema(schema) as AnySchema);
      this.validators.set(key, validate);
    }
    return validate;
  }
}

/** The declared response for a status: exact, then a range such as `4XX`, then `default`. */
function responseFor(responses: Record<string, ResponseObject>, status: number): [string, ResponseObject] | undefined {
  for (const key of [String(status), `${String(status)[0]}XX`, `${String(status)[0]}xx`, 'default']) {
    if (responses[key] !== undefined) return [key, responses[key]];
  }
  return undefined;
}

function describeParams(params: Record<string, unknown>): string {
  const shown = Object.entries(params).filter(([, value]) => value !== undefined);
  return shown.length === 0 ? '' : ` (${shown.map(([name, value]) => `${name}: ${JSON.stringify(value)}`).join(', ')})`;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

const checkers = new WeakMap<OpenApiDocument, DocumentChecker>();

function checkerFor(document: OpenApiDocument): DocumentChecker {
  let checker = checkers.get(document);
  if (checker === undefined) {
    checker = new DocumentChecker(document);
    checkers.set(document, checker);
  }
  return checker;
}

/**
 * What is wrong with one real answer, measured against the document: an empty
 * list when the operation exists, the status is declared and the body fits the
 * declared schema. `body` is the parsed JSON (or the text of a non-JSON
 * answer), undefined when there was none.
 */
export function answerProblems(document: OpenApiDocument, method: string, path: string, status: number, body: unknown): string[] {
  return checkerFor(document).problems(method, path, status, body);
}

/** The path template of the operation a request reaches (`/admin/events/{id}` for `/admin/events/evt_1`), if any. */
export function operationPath(document: OpenApiDocument, method: string, path: string): string | undefined {
  return checkerFor(document).template(method, path);
}
