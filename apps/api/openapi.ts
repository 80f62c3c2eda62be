// The HTTP API's OpenAPI 3.1 document, generated from the routes themselves: each route is
// recorded as it is declared (fastify's onRoute hook), with the TypeBox schemas fastify
// validates (params, querystring, headers, body, response) and, under `config.openapi`, what
// its handler checks or answers itself. Served at GET /v1/openapi.json without authentication
// and committed as apps/api/openapi.json (`npm run openapi`); test/openapi.int.test.ts keeps the
// two equal, so the document cannot go stale. Every operation documents its success answers
// (a route without one stops the start, as one without an authentication does).
import { readFileSync } from 'node:fs';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { Type, type TSchema } from '@sinclair/typebox';
import { sessionCookieNameFor } from '../../domain/management.ts';
import { httpStatusOf } from './error-registry.ts';

/** How a route authenticates its caller. */
export type Security = 'apiKey' | 'session' | 'none';

/**
 * Response headers some answers carry, each documented once (components.headers) and named by
 * the answers that send it; X-Request-Id by every answer (REQUEST_ID_HEADER, apps/api/server.ts).
 */
const RESPONSE_HEADERS = {
  'X-Request-Id': {
    description: 'The id of the request, on every answer: the `requestId` of its line in Relay\'s log and the `correlationId` of the events it ' +
      'appended. Quote it when reporting a failure (a 500 above all).',
    schema: { type: 'string', format: 'uuid' },
  },
  'Retry-After': {
    description: 'Whole seconds to wait before trying again (at least 1).',
    schema: { type: 'integer', minimum: 1 },
  },
  'RateLimit-Policy': {
    description: 'The request-rate policies of the request (IETF draft-ietf-httpapi-ratelimit-headers), comma-separated: ' +
      'name, quota (q) and window in seconds (w), e.g. `"dev-key";q=15;w=60`. Policies: dev-key, key (production keys), workspace.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'Where the request leaves each policy of RateLimit-Policy, in the same order: requests remaining (r) and seconds ' +
      'until the window resets (t), e.g. `"dev-key";r=14;t=60`.',
    schema: { type: 'string' },
  },
} as const;

export type ResponseHeader = keyof typeof RESPONSE_HEADERS;

/** What a route declares for the document beyond its `schema` (fastify route option `config.openapi`). */
export interface OpenApiRoute {
  summary?: string;
  /** Overrides the authentication of the plugin that declares the route. */
  security?: Security;
  /**
   * The request body as documented, in place of `schema.body`: a body the handler validates
   * itself, for messages a schema cannot give (declaring it as `schema.body` would have fastify
   * validate it first), or a validated body with the rules its handler checks after fastify
   * (answers a schema would word or number otherwise: 422 for template variables, the
   * messages of html-or-text and of webhook event types).
   */
  body?: TSchema;
  /** The body may be left out (the handler takes none as `{}`). */
  optionalBody?: boolean;
  /** The query as documented, in place of `schema.querystring`, when the validated one is written otherwise (the same values pass). */
  query?: TSchema;
  /** Request headers the handler reads and checks itself (an object schema, as `schema.headers`). */
  headers?: TSchema;
  /**
   * Successful answers: status → description and, for JSON, the body's schema (or another media
   * type), and the headers it carries. Documents, does not serialize: the handler builds the body.
   */
  responses?: Record<number, { description: string; schema?: TSchema; mediaType?: string; headers?: ResponseHeader[] }>;
  /** Failures that carry headers of their own (429 and Retry-After): each answers the error envelope, as the rest of 4XX. */
  failures?: Record<number, { description: string; headers: ResponseHeader[] }>;
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
/** A session operation takes either cookie: the one of production (`__Host-` prefixed) or the other one; any of the two suffices. */
const SECURITY_REQUIREMENTS: Record<Security, Array<Record<string, string[]>>> = {
  apiKey: [{ apiKey: [] }], session: [{ session: [] }, { productionSession: [] }], none: [],
};
const ERROR_RESPONSE = { $ref: '#/components/responses/Error' };
const UNAVAILABLE_RESPONSE = { $ref: '#/components/responses/Unavailable' };
const SESSION_COOKIE = sessionCookieNameFor('development');
const PRODUCTION_SESSION_COOKIE = sessionCookieNameFor('production');

function documentOf(routes: RecordedRoute[]): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  const named: NamedSchemas = new Map();
  // Code-unit order, not the locale's: the document is the same wherever it is generated.
  const byPath = (a: RecordedRoute, b: RecordedRoute) => (a.url < b.url ? -1 : a.url > b.url ? 1 : 0);
  const sorted = [...routes].sort((a, b) => byPath(a, b) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method));
  for (const route of sorted) {
    if (route.security === undefined) throw new Error(`${route.method} ${route.url}: declared in a scope with no authentication recorded (RouteRecorder.secure)`);
    if (!Object.keys({ ...(route.schema.response as object | undefined), ...route.openapi.responses }).some((status) => status.startsWith('2'))) {
      throw new Error(`${route.method} ${route.url}: documents no success answer (config.openapi.responses)`);
    }
    (paths[openApiPath(route.url)] ??= {})[route.method.toLowerCase()] = operationOf(route, route.security, named);
  }
  const schemas: Record<string, unknown> = { Error: jsonSchemaOf(ErrorEnvelope, named) };
  for (const name of [...named.keys()].sort()) {
    if (name in schemas) throw new Error(`the schema name ${name} ($id) is taken`);
    schemas[name] = named.get(name)!.schema;
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
      schemas,
      responses: {
        Error: { description: 'The request failed: the error envelope, its code naming why.', ...headersOf(undefined), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        Unavailable: {
          description: 'The server stops, or is busy: try again, after Retry-After seconds when given (service_unavailable).',
          ...headersOf(['Retry-After']), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
      headers: RESPONSE_HEADERS,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key of a project (rr_live_… or rr_test_…) with the permission the operation needs (email:send, email:read).' },
        session: {
          type: 'apiKey', in: 'cookie', name: SESSION_COOKIE,
          description: `The dashboard session that POST /v1/session sets, outside production. With RELAY_ENV=production the cookie is ${PRODUCTION_SESSION_COOKIE} ` +
            `(productionSession) and ${SESSION_COOKIE} is not read. A state-changing request that carries an Origin must carry RELAY_DASHBOARD_ORIGIN's.`,
        },
        productionSession: {
          type: 'apiKey', in: 'cookie', name: PRODUCTION_SESSION_COOKIE,
          description: `The dashboard session that POST /v1/session sets with RELAY_ENV=production (elsewhere the cookie is ${SESSION_COOKIE}: session). ` +
            'A state-changing request that carries an Origin must carry RELAY_DASHBOARD_ORIGIN\'s.',
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

/** The `headers` of a response: references to components.headers, X-Request-Id first (every answer carries it). */
const headersOf = (names: ResponseHeader[] | undefined) =>
  ({ headers: Object.fromEntries(['X-Request-Id', ...(names ?? [])].map((name) => [name, { $ref: `#/components/headers/${name}` }])) });

function operationOf(route: RecordedRoute, security: Security, named: NamedSchemas): Record<string, unknown> {
  const json = (schema: TSchema) => jsonSchemaOf(schema, named);
  const parameters = PARAMETER_PARTS.flatMap(([part, where]) => {
    const declared = part === 'querystring' ? route.openapi.query ?? route.schema[part] : part === 'headers' ? route.schema[part] ?? route.openapi.headers : route.schema[part];
    const schema = declared as { properties?: Record<string, TSchema>; required?: string[] } | undefined;
    return Object.entries(schema?.properties ?? {}).map(([name, property]) => ({
      name, in: where, required: where === 'path' || (schema?.required ?? []).includes(name), schema: json(property),
    }));
  });
  const body = route.openapi.body ?? (route.schema.body as TSchema | undefined);
  const responses: Record<string, unknown> = {};
  const declared = { ...(route.schema.response as Record<string, TSchema> | undefined) };
  for (const [status, schema] of Object.entries(declared)) responses[status] = { description: 'Success.', ...headersOf(undefined), content: { 'application/json': { schema: json(schema) } } };
  for (const [status, answer] of Object.entries(route.openapi.responses ?? {})) {
    responses[status] = {
      description: answer.description,
      ...headersOf(answer.headers),
      ...(answer.mediaType ? { content: { [answer.mediaType]: {} } } : answer.schema ? { content: { 'application/json': { schema: json(answer.schema) } } } : {}),
    };
  }
  for (const [status, failure] of Object.entries(route.openapi.failures ?? {})) {
    responses[status] = { description: failure.description, ...headersOf(failure.headers), content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  }
  // Any operation may be answered 503 while the server stops or a shared resource is busy, most
  // with Retry-After (the body budget, a stop's drain, sign-in's hashing, DKIM key generation).
  responses['503'] ??= UNAVAILABLE_RESPONSE;
  responses['4XX'] ??= ERROR_RESPONSE;
  responses['5XX'] ??= ERROR_RESPONSE;
  return {
    operationId: operationIdOf(route.method, route.url),
    ...(route.openapi.summary ? { summary: route.openapi.summary } : {}),
    security: SECURITY_REQUIREMENTS[security],
    ...(parameters.length ? { parameters } : {}),
    ...(body ? { requestBody: { required: route.openapi.optionalBody !== true, content: { 'application/json': { schema: json(body) } } } } : {}),
    responses,
  };
}

/**
 * Schemas named by a TypeBox `$id` (the management API's resources: Domain, ApiKey, …): each is
 * kept once, in components.schemas under its name, and referenced wherever it is used.
 */
type NamedSchemas = Map<string, { source: string; schema: unknown }>;

/**
 * A TypeBox schema as plain JSON Schema 2020-12 (what OpenAPI 3.1 uses): TypeBox's own marks
 * are symbols, which JSON drops; Relay's keywords become a description (`errorMessage`, the
 * rule in words) and an extension (`lengthAfterTrim`, apps/api/plugins/text.schemas.ts); a
 * schema with an `$id` becomes a reference to its entry of `named`.
 */
function jsonSchemaOf(schema: TSchema, named: NamedSchemas): unknown {
  const plain = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(plain);
    if (value === null || typeof value !== 'object') return value;
    if (typeof (value as { $id?: unknown }).$id === 'string') {
      const { $id: name, ...rest } = value as Record<string, unknown> & { $id: string };
      const source = JSON.stringify(rest);
      const known = named.get(name);
      if (known && known.source !== source) throw new Error(`two different schemas are named ${name} ($id)`);
      if (!known) named.set(name, { source, schema: plain(rest) });
      return { $ref: `#/components/schemas/${name}` };
    }
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
