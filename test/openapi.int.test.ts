// The OpenAPI document (apps/api/openapi.ts): the committed apps/api/openapi.json is what the
// server serves at GET /v1/openapi.json and what `relay openapi` prints, so it cannot go stale;
// it is OpenAPI 3.1 in structure, names every route of the app with its methods, tells the
// truth about authentication, and the answers it describes are the answers the API gives.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ASSET_PATHS, PAGE_PATHS } from '../apps/dashboard/dashboard.ts';
import { serializeDocument } from '../apps/api/openapi.ts';
import { EmailDetail, EmailList, SendResult } from '../apps/api/plugins/email-responses.schemas.ts';
import { Template, TemplateDeleted, TemplateList, TemplatePreviewResult } from '../apps/api/plugins/template-responses.schemas.ts';
import { call } from './support/management.ts';
import { DASHBOARD_ORIGIN, sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const COMMITTED = fileURLToPath(new URL('../apps/api/openapi.json', import.meta.url));
const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Operation {
  operationId: string;
  security: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: string; required: boolean; schema: unknown }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { $ref?: string; description?: string; content?: Record<string, { schema?: unknown }> }>;
}
type Doc = {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: Record<string, Record<string, any>>;
};

const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method, operation })));

/** Follows a local "#/a/b" reference. */
function resolve(doc: Doc, ref: string): any {
  assert.match(ref, /^#\//, `local reference ${ref}`);
  return ref.slice(2).split('/').reduce<any>((node, key) => node?.[key], doc);
}

interface Ctx { world: TemplateWorld; served: Doc; servedText: string }
const test = suite<Ctx>('OpenAPI document');

test.before(async (ctx) => {
  ctx.world = await templateWorld('embedded');
  const response = await ctx.world.t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  assert.is(response.statusCode, 200, response.body);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  ctx.servedText = response.body;
  ctx.served = response.json();
});
test.after(async ({ world }) => {
  await world?.t.close();
});

test('GET /v1/openapi.json needs no credentials and serves exactly the committed apps/api/openapi.json (npm run openapi)', ({ served }) => {
  const committed = readFileSync(COMMITTED, 'utf8');
  assert.ok(serializeDocument(served) === committed, 'apps/api/openapi.json is stale: run `npm run openapi` and commit the result');
  assert.equal(served, JSON.parse(committed));
});

test('`relay openapi` prints the same document in the default environment (nothing depends on the configuration)', async () => {
  // Other settings than the served app's (production, another dashboard origin).
  const child = spawn(process.execPath, [MAIN, 'openapi'], { env: { ...process.env, RELAY_ENV: 'production', RELAY_DELIVERY: 'outbox', RELAY_DASHBOARD_ORIGIN: 'https://elsewhere.test', RELAY_LOG_LEVEL: 'silent' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.is(code, 0, stderr);
  assert.ok(stdout === readFileSync(COMMITTED, 'utf8'), 'relay openapi prints the committed document');
});

test('it is OpenAPI 3.1 in structure: info, paths, unique operation ids, path parameters, references that resolve', ({ served }) => {
  assert.is(served.openapi, '3.1.0');
  assert.is(served.info.title, 'Relay HTTP API');
  assert.is(served.info.version, JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
  const ids = new Set<string>();
  for (const { path, method, operation } of operations(served)) {
    const where = `${method.toUpperCase()} ${path}`;
    assert.match(path, /^\/[^:]*$/, `${where}: path parameters are written {name}`);
    assert.ok(METHODS.includes(method), `${where}: a method`);
    assert.type(operation.operationId, 'string', where);
    assert.not.ok(ids.has(operation.operationId), `${where}: operationId ${operation.operationId} is unique`);
    ids.add(operation.operationId);
    // Each {name} of the path is a required path parameter, and each path parameter is in the path.
    const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
    const declared = (operation.parameters ?? []).filter((p) => p.in === 'path');
    assert.equal(declared.map((p) => p.name).sort(), inPath, `${where}: path parameters`);
    for (const p of declared) assert.ok(p.required, `${where}: path parameter ${p.name} is required`);
    for (const p of operation.parameters ?? []) assert.ok(['path', 'query', 'header', 'cookie'].includes(p.in) && p.schema, `${where}: parameter ${p.name}`);
    for (const requirement of operation.security) for (const scheme of Object.keys(requirement)) assert.ok(served.components.securitySchemes[scheme], `${where}: security scheme ${scheme}`);
    assert.ok(Object.keys(operation.responses).some((s) => /^2(\d\d|XX)$/.test(s)), `${where}: a success response`);
  }
  const refs = [...JSON.stringify(served).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]);
  assert.ok(refs.length > 0);
  for (const ref of new Set(refs)) assert.ok(resolve(served, ref), `${ref} resolves`);
});

test('every 4xx and 5xx answer is the error envelope, by reference; a 503 names its Retry-After', ({ served }) => {
  const envelope = served.components.schemas.Error;
  assert.equal(envelope.required, ['error']);
  assert.equal(envelope.properties.error.required, ['code', 'message']);
  assert.match(envelope.properties.error.properties.code.description, /validation_error \(400\).*invalid_api_key \(401\).*not_found \(404\)/);
  assert.is(served.components.responses.Error.content['application/json'].schema.$ref, '#/components/schemas/Error');
  for (const { path, method, operation } of operations(served)) {
    assert.is(operation.responses['4XX']?.$ref, '#/components/responses/Error', `${method.toUpperCase()} ${path}: 4XX`);
    assert.is(operation.responses['5XX']?.$ref, '#/components/responses/Error', `${method.toUpperCase()} ${path}: 5XX`);
    // (GET /readyz documents a 503 of its own: not ready.)
    const unavailableAnswer = operation.responses['503'];
    assert.ok(unavailableAnswer?.$ref === '#/components/responses/Unavailable' || (path === '/readyz' && unavailableAnswer?.description), `${method.toUpperCase()} ${path}: 503`);
  }
  const unavailable = served.components.responses.Unavailable as { headers: Record<string, { $ref: string }>; content: Record<string, { schema: { $ref: string } }> };
  assert.is(unavailable.headers['Retry-After'].$ref, '#/components/headers/Retry-After');
  assert.is(unavailable.content['application/json'].schema.$ref, '#/components/schemas/Error');
});

test('every route of the app is in the document with each of its methods, and nothing else is', ({ world, served }) => {
  const app = world.t.app;
  const documented = operations(served);
  for (const { path, method } of documented) {
    assert.ok(app.hasRoute({ method: method.toUpperCase() as 'GET', url: path.replace(/\{([^}]+)\}/g, ':$1') }), `${method.toUpperCase()} ${path} is a route of the app`);
  }
  // fastify's own table, with the HEAD it adds to every GET left out: as many routes as operations.
  const table = app.printRoutes({ commonPrefix: false });
  const methods = [...table.matchAll(/\(([A-Z, ]+)\)\s*$/gm)].flatMap((m) => m[1].split(', ')).filter((m) => m !== 'HEAD');
  assert.ok(methods.length > 40, table);
  // The dashboard's pages and modules (apps/dashboard/) are the API's client, not its operations.
  const dashboard = [...PAGE_PATHS, ...ASSET_PATHS];
  for (const path of dashboard) assert.ok(app.hasRoute({ method: 'GET', url: path }), path);
  assert.not.ok(Object.keys(served.paths).some((path) => dashboard.includes(path) || path.startsWith('/assets')));
  assert.is(documented.length + dashboard.length, methods.length, `the app's routes:\n${table}`);
  for (const [path, verbs] of [['/v1/emails', ['get', 'post']], ['/v1/emails/{id}', ['get']], ['/v1/templates/{id}', ['get', 'delete', 'patch']], ['/v1/openapi.json', ['get']]] as const) {
    assert.equal(Object.keys(served.paths[path] ?? {}).sort(), [...verbs].sort(), path);
  }
});

test('the authentication each operation names is the one the API asks for: without credentials, 401 exactly where it names one', async ({ world, served }) => {
  for (const { path, method, operation } of operations(served)) {
    const url = path.replace(/\{([^}]+)\}/g, 'x1');
    const response = await world.t.app.inject({ method: method.toUpperCase() as 'GET', url, headers: { origin: DASHBOARD_ORIGIN } });
    const where = `${method.toUpperCase()} ${path} → ${response.statusCode} ${response.body.slice(0, 200)}`;
    if (operation.security.length === 0) assert.is.not(response.statusCode, 401, where);
    else {
      assert.is(response.statusCode, 401, where);
      const scheme = Object.keys(operation.security[0])[0];
      assert.is(response.json().error.code, scheme === 'apiKey' ? 'invalid_api_key' : 'session_required', where);
    }
  }
  assert.equal(operations(served).filter((o) => o.operation.security.length === 0).map((o) => `${o.method} ${o.path}`).sort(), [
    'get /healthz', 'get /metrics', 'get /readyz', 'get /v1/asyncapi.json', 'get /v1/openapi.json', 'post /v1/session',
  ]);
});

test('the documented request bodies and answers of the emails and templates endpoints are what the API takes and gives', async ({ world, served }) => {
  const { t, apiKey, owner, projectId, domain } = world;
  const matches = (schema: TSchema, body: unknown, where: string) => {
    const checker = TypeCompiler.Compile(schema);
    assert.ok(checker.Check(body), `${where}: ${JSON.stringify([...checker.Errors(body)].slice(0, 3).map((e) => `${e.path} ${e.message}`))} in ${JSON.stringify(body)}`);
  };
  // The schema the document shows for an answer is the one the answer is checked against here.
  const documented = (path: string, method: string, status: string, schema: TSchema) =>
    assert.equal(served.paths[path][method].responses[status].content?.['application/json'].schema, JSON.parse(JSON.stringify(schema)), `${method} ${path} ${status}`);
  documented('/v1/emails', 'post', '202', SendResult);
  documented('/v1/emails', 'get', '200', EmailList);
  documented('/v1/emails/{id}', 'get', '200', EmailDetail);
  documented('/v1/templates', 'get', '200', TemplateList);
  documented('/v1/templates', 'post', '201', Template);
  documented('/v1/templates/{id}', 'get', '200', Template);
  documented('/v1/templates/{id}', 'patch', '200', Template);
  documented('/v1/templates/{id}', 'delete', '200', TemplateDeleted);
  documented('/v1/templates/preview', 'post', '200', TemplatePreviewResult);

  const sent = await sendEmail(t, apiKey, { from: `hello@${domain}`, to: `you@${domain}`, subject: 'Documented', text: 'hi', tags: { kind: 'doc' } });
  assert.is(sent.statusCode, 202, sent.body);
  matches(SendResult, sent.json(), 'POST /v1/emails 202');
  assert.ok(served.paths['/v1/emails'].post.requestBody, 'the send body, checked by the handler, is documented');
  assert.ok(served.paths['/v1/emails'].post.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'));

  const auth = { authorization: `Bearer ${apiKey}` };
  const detail = await t.app.inject({ method: 'GET', url: `/v1/emails/${sent.json().id}`, headers: auth });
  assert.is(detail.statusCode, 200, detail.body);
  matches(EmailDetail, detail.json(), 'GET /v1/emails/{id} 200');
  const list = await t.app.inject({ method: 'GET', url: '/v1/emails', headers: auth });
  assert.is(list.statusCode, 200, list.body);
  matches(EmailList, list.json(), 'GET /v1/emails 200');

  const created = await templates(t, 'POST', '/v1/templates', { as: owner, projectId, body: { name: 'Welcome', slug: 'welcome', subject: 'Hi {{name}}', text: 'Hello {{name}}' } });
  assert.is(created.statusCode, 201, created.body);
  matches(Template, created.json(), 'POST /v1/templates 201');
  const id = created.json().id as string;
  matches(Template, (await templates(t, 'GET', `/v1/templates/${id}`, { as: owner, projectId })).json(), 'GET /v1/templates/{id}');
  matches(TemplateList, (await templates(t, 'GET', '/v1/templates', { as: owner, projectId })).json(), 'GET /v1/templates');
  const preview = await templates(t, 'POST', '/v1/templates/preview', { as: owner, projectId, body: { subject: 'Hi {{name}}', text: 'x', variables: { name: 'Ann' } } });
  matches(TemplatePreviewResult, preview.json(), 'POST /v1/templates/preview');
  const updated = await templates(t, 'PATCH', `/v1/templates/${id}`, { as: owner, projectId, body: { name: 'Welcome', slug: 'welcome', subject: 'Hey', text: 'x', revision: 1 } });
  matches(Template, updated.json(), 'PATCH /v1/templates/{id}');
  matches(TemplateDeleted, (await templates(t, 'DELETE', `/v1/templates/${id}`, { as: owner, projectId })).json(), 'DELETE /v1/templates/{id}');

  // A failure, for the envelope the document references.
  const refused = await call(t, 'GET', '/v1/emails/nope', { headers: auth });
  assert.is(refused.statusCode, 404);
  assert.equal(Object.keys(refused.json()), ['error']);
  assert.equal(Object.keys(refused.json().error).sort(), ['code', 'message']);
});

test.run();
