/** The OpenAPI document the engine serves: complete, and valid OpenAPI 3. */
import SwaggerParser from '@apidevtools/swagger-parser';
import { rulesDir, startEngine, type RunningEngine } from './support/engine.js';
import { body } from './support/events.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SPEC_ROUTES: Array<[string, string]> = [
  ['post', '/webhooks'],
  ['get', '/health'],
  ['get', '/health/ready'],
  ['get', '/metrics'],
  ['get', '/admin/rules'],
  ['post', '/admin/rules'],
  ['get', '/admin/rules/{id}'],
  ['put', '/admin/rules/{id}'],
  ['delete', '/admin/rules/{id}'],
  ['post', '/admin/rules/{id}/enable'],
  ['post', '/admin/rules/{id}/disable'],
  ['post', '/admin/rules/validate'],
  ['post', '/admin/rules/{id}/test'],
  ['post', '/admin/rules/test'],
  ['post', '/admin/rules/backtest'],
  ['post', '/admin/rules/reload'],
  ['get', '/admin/events'],
  ['get', '/admin/events/{id}'],
  ['post', '/admin/events'],
  ['post', '/admin/events/{id}/replay'],
  ['get', '/admin/executions'],
  ['get', '/admin/executions/{id}'],
  ['get', '/admin/actions'],
  ['post', '/admin/actions/{id}/retry'],
];

type Operation = { responses: Record<string, { content?: Record<string, { schema?: unknown }> }>; security?: unknown[]; requestBody?: unknown };

describe('the OpenAPI document', () => {
  let engine: RunningEngine;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let document: any;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'engine-openapi-'));
    engine = await startEngine({ DATABASE_URL: `sqlite:${join(dir, 'e.sqlite')}`, RULES_DIR: rulesDir([]) });
    const res = await fetch(`${engine.url}/docs-json`);
    expect(res.status).toBe(200);
    document = await body(res);
  });

  afterAll(() => engine.stop());

  it('is valid OpenAPI 3', async () => {
    expect(document.openapi).toMatch(/^3\./);
    await expect(SwaggerParser.validate(structuredClone(document))).resolves.toBeDefined();
  });

  it.each(SPEC_ROUTES)('describes %s %s', (method, path) => {
    expect(document.paths[path]?.[method]).toBeDefined();
  });

  it('describes the error shape and uses it for every error answer', () => {
    expect(document.components.schemas.Error.properties.error.required).toEqual(['code', 'message']);
    for (const [path, methods] of Object.entries<Record<string, Operation>>(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          if (Number(status) < 400) continue;
          expect([path, method, status, response.content?.['application/json']?.schema]).toEqual([
            path, method, status, { $ref: '#/components/schemas/Error' },
          ]);
        }
      }
    }
  });

  it('marks every admin route as needing the bearer token (or a console session) and answering 401', () => {
    for (const [path, methods] of Object.entries<Record<string, Operation>>(document.paths)) {
      if (!path.startsWith('/admin')) continue;
      for (const operation of Object.values(methods)) {
        expect(operation.security).toEqual([{ bearer: [] }, { engine_console: [] }]);
        expect(operation.responses['401']).toBeDefined();
      }
    }
  });

  it('describes the body of every route that takes one', () => {
    const withBodies = ['/webhooks', '/admin/rules', '/admin/rules/validate', '/admin/rules/test', '/admin/rules/backtest', '/admin/events'];
    for (const path of withBodies) expect([path, document.paths[path].post.requestBody]).toEqual([path, expect.anything()]);
    expect(document.paths['/admin/rules/{id}'].put.requestBody).toBeDefined();
  });

  it('serves a page for people at /docs', async () => {
    const res = await fetch(`${engine.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
  });
});
