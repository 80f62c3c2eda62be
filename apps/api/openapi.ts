// The HTTP API's OpenAPI 3.1 document, generated from the routes themselves: each route is
// recorded as it is declared (fastify's onRoute hook), with the TypeBox schemas fastify
// validates (params, querystring, headers, body, response) and, under `config.openapi`, what
// its handler checks or answers itself. Served at GET /v1/openapi.json without authentication
// and committed as apps/api/openapi.json (`npm run openapi`); test/openapi.int.test.ts keeps the
// two equal, so the document cannot go stale.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { Type, type TSchema } from '@sinclair/typebox';
import { httpStatusOf } from './error-registry.ts';

/** How a route authenticates its caller. */
export type Security = 'apiKey' | 'session' | 'none';

/** What a route declares for the document beyond its `schema` (fastify route option `config.openapi`). */
export interface OpenApiRoute {
  summary?: string;
  /** Overrides the authentication of the plugin that declares the route. */
  security?: Security;
  /**
   * A request body the handler validates itself, for messages a schema cannot give (declaring
   * it as `schema.body` would have fastify validate it first).
   */
  body?: TSchema;
  /** Request headers the handler reads and checks itself (an object schema, as `schema.headers`). */
  headers?: TSchema;
  /** Successful answers: status → description and, for JSON, the body's schema (or another media type). */
  responses?: Record<number, { description: string; schema?: TSchema; mediaType?: string }>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    openapi?: OpenApiRoute;
  }
}

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The spec's error envelope, answered for every failure (apps/api/error-registry.ts). */
export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.String({
          description: `Machine-readable; one of ${Object.entries(httpStatusOf).map(([code, status]) => `${code} (${status})`).join(', ')}.`,
        }),
        message: Type.String({ description: 'One sentence for people, naming the field or rule at fault.' }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

interface RecordedRoute {
  method: string;
  url: string;
  schema: Record<string, unknown>;
  openapi: OpenApiRoute;
  security: Security | undefined;
}

export interface RouteRecorder {
  /** Routes that `scope` declares authenticate this way unless their `config.openapi` says otherwise. */
  secure(scope: FastifyInstance, security: Security): void;
  /** Routes that `scope` declares are not operations of the API (the dashboard's pages and files). */
  omit(scope: FastifyInstance): void;
  /** The document of every route declared so far (call it once the app is ready). */
  document(): OpenApiDocument;
}

export type OpenApiDocument = Record<string, unknown>;

/** Records every route `app` and its plugins declare from now on. */
export function recordRoutes(app: FastifyInstance): RouteRecorder {
  const securityOf = new WeakMap<FastifyInstance, Security>();
  const omitted = new WeakSet<FastifyInstance>();
  const routes: RecordedRoute[] = [];
  app.addHook('onRoute', function (this: FastifyInstance, route: RouteOptions) {
    if (omitted.has(this)) return;
    const openapi = route.config?.openapi ?? {};
    // HEAD is answered for every GET by fastify itself; it is not an operation of its own.
    for (const method of [route.method].flat().filter((m) => m !== 'HEAD')) {
      routes.push({ method, url: route.url, schema: (route.schema ?? {}) as Record<string, unknown>, openapi, security: openapi.security ?? securityOf.get(this) });
    }
  });
  let built: OpenApiDocument | null = null;
  return {
    secure: (scope, security) => void securityOf.set(scope, security),
    omit: (scope) => void omitted.add(scope),
    document: () => (built ??= documentOf(routes)),
  };
}

/** The document as committed: stable key order from the routes, two-space indentation, a final newline. */
export const serializeDocument = (document: OpenApiDocument): string => `${JSON.stringify(document, null, 2)}\n`;

const METHOD_ORDER = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE'];
const PARAMETER_PARTS = [['params', 'path'], ['querystring', 'query'], ['headers', 'header']] as const;
const SECURITY_REQUIREMENTS: Record<Security, Array<Record<string, string[]>>> = { apiKey: [{ apiKey: [] }], session: [{ session: [] }], none: [] };
const ERROR_RESPONSE = { $ref: '#/components/responses/Error' };

function documentOf(routes: RecordedRoute[]): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  // Code-unit order, not the locale's: the document is the same wherever it is generated.
  const byPath = (a: RecordedRoute, b: RecordedRoute) => (a.url < b.url ? -1 : a.url > b.url ? 1 : 0);
  const sorted = [...routes].sort((a, b) => byPath(a, b) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method));
  for (const route of sorted) {
    if (route.security === undefined) throw new Error(`${route.method} ${route.url}: declared in a scope with no authentication recorded (RouteRecorder.secure)`);
    (paths[openApiPath(route.url)] ??= {})[route.method.toLowerCase()] = operationOf(route, route.security);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Relay HTTP API',
      version: VERSION,
      description:
        'Relay implements the customer\'s interface specification (sending, reading and templates; its choices where the ' +
        'specification is silent are in apps/api/INTERFACE-DECISIONS.md) and the management API of apps/api/MANAGEMENT-API.md. ' +
        'Every failure answers the error envelope. Generated from the routes (`npm run openapi`); served at GET /v1/openapi.json.',
    },
    paths,
    components: {
      schemas: { Error: jsonSchemaOf(ErrorEnvelope) },
      responses: {
        Error: { description: 'The request failed: the error envelope, its code naming why.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key of a project (rr_live_… or rr_test_…) with the permission the operation needs (email:send, email:read).' },
        session: {
          type: 'apiKey', in: 'cookie', name: 'rr_session',
          description: 'The dashboard session that POST /v1/session sets (the cookie is __Host-rr_session when RELAY_ENV=production). ' +
            'State-changing requests must also carry the Origin of RELAY_DASHBOARD_ORIGIN.',
        },
      },
    },
  };
}

/** "/v1/emails/:id" → "/v1/emails/{id}" */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** "GET /v1/projects/:projectId/api-keys" → "getProjectsByProjectIdApiKeys" */
function operationIdOf(method: string, url: string): string {
  const capitalized = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);
  const words = url.split('/').filter((s) => s && s !== 'v1').map((s) => (s.startsWith(':') ? `By${capitalized(s.slice(1))}` : s.split(/[^A-Za-z0-9]+/).map(capitalized).join('')));
  return method.toLowerCase() + words.join('');
}

function operationOf(route: RecordedRoute, security: Security): Record<string, unknown> {
  const parameters = PARAMETER_PARTS.flatMap(([part, where]) => {
    const schema = (route.schema[part] ?? (part === 'headers' ? route.openapi.headers : undefined)) as { properties?: Record<string, TSchema>; required?: string[] } | undefined;
    return Object.entries(schema?.properties ?? {}).map(([name, property]) => ({
      name, in: where, required: where === 'path' || (schema?.required ?? []).includes(name), schema: jsonSchemaOf(property),
    }));
  });
  const body = (route.schema.body as TSchema | undefined) ?? route.openapi.body;
  const responses: Record<string, unknown> = {};
  const declared = { ...(route.schema.response as Record<string, TSchema> | undefined) };
  for (const [status, schema] of Object.entries(declared)) responses[status] = { description: 'Success.', content: { 'application/json': { schema: jsonSchemaOf(schema) } } };
  for (const [status, answer] of Object.entries(route.openapi.responses ?? {})) {
    responses[status] = {
      description: answer.description,
      ...(answer.mediaType ? { content: { [answer.mediaType]: {} } } : answer.schema ? { content: { 'application/json': { schema: jsonSchemaOf(answer.schema) } } } : {}),
    };
  }
  if (!Object.keys(responses).some((status) => status.startsWith('2'))) responses['2XX'] = { description: 'Success: a JSON object.' };
  responses['4XX'] ??= ERROR_RESPONSE;
  responses['5XX'] ??= ERROR_RESPONSE;
  return {
    operationId: operationIdOf(route.method, route.url),
    ...(route.openapi.summary ? { summary: route.openapi.summary } : {}),
    security: SECURITY_REQUIREMENTS[security],
    ...(parameters.length ? { parameters } : {}),
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchemaOf(body) } } } } : {}),
    responses,
  };
}

/**
 * A TypeBox schema as plain JSON Schema 2020-12 (what OpenAPI 3.1 uses): TypeBox's own marks
 * are symbols, which JSON drops; Relay's keywords become a description (`errorMessage`, the
 * rule in words) and an extension (`lengthAfterTrim`, apps/api/plugins/text.schemas.ts).
 */
function jsonSchemaOf(schema: TSchema): unknown {
  const plain = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(plain);
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) {
      if (key === 'errorMessage') {
        if (!('description' in value)) out.description = member;
      } else if (key === 'lengthAfterTrim') out['x-lengthAfterTrim'] = member;
      else if (key === 'properties' || key === 'patternProperties') {
        // Names of members, not keywords: kept as they are.
        out[key] = Object.fromEntries(Object.entries(member as Record<string, unknown>).map(([name, property]) => [name, plain(property)]));
      } else out[key] = plain(member);
    }
    return out;
  };
  return plain(JSON.parse(JSON.stringify(schema)));
}
