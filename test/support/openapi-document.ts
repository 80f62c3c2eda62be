// The OpenAPI document as a client generator or a request validator reads it: fetched from the
// running API (GET /v1/openapi.json) and checked with an independent JSON Schema 2020-12
// validator (Ajv, with ajv-formats), not with Relay's own TypeBox compiler.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { TestApp } from './app.ts';

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: Record<string, Record<string, any>>;
};

export interface OpenApiOperation {
  operationId: string;
  security: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: string; required: boolean; schema: unknown }>;
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { $ref?: string; description?: string; content?: Record<string, { schema?: unknown }> }>;
}

/** The document the API serves, without credentials. */
export async function servedDocument(t: TestApp): Promise<OpenApiDocument> {
  const response = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  if (response.statusCode !== 200) throw new Error(`GET /v1/openapi.json: ${response.statusCode} ${response.body}`);
  return response.json() as OpenApiDocument;
}

/** Compiles schemas of `doc` with Ajv 2020-12; local "#/…" references resolve inside the document. */
export function schemaChecker(doc: OpenApiDocument): (schema: unknown) => ValidateFunction {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(doc as object, 'openapi');
  return (schema) => ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"$ref":"#/', '"$ref":"openapi#/')) as object);
}

/** The JSON schema the document gives for the request body of `method path` ("post", "/v1/emails"). */
export function requestBodySchema(doc: OpenApiDocument, method: string, path: string): unknown {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
  const schema = operation.requestBody?.content['application/json']?.schema;
  if (!schema) throw new Error(`${method.toUpperCase()} ${path} documents no JSON request body`);
  return schema;
}
