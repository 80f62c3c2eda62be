// The contract defines TemplateVariables: "Object with at most 100 properties. Property names
// match ^[A-Za-z][A-Za-z0-9_]{0,63}$. Values are a string (max 10,000 characters), a number or a
// boolean", and the API enforces exactly that in the three request bodies that take them, a
// template send (POST /v1/emails), a preview (POST /v1/templates/preview) and "send a test"
// (POST /v1/templates/{id}/test), answering 422 invalid_template_variables otherwise (its handler
// checks them, not fastify, so that wrong variables are 422 rather than 400). The OpenAPI
// document gives each `variables` that schema (type object, maxProperties 100, names by pattern,
// values string maxLength 10000 | number | boolean: the documented body of
// `config.openapi.body`, apps/api/openapi.ts), so a generated client types the variables and a
// body checked against the document before it is sent (a string, nested objects, null values,
// 101 variables, a name beginning with a digit, a 10,001-character value) is refused there as the
// API refuses it, and a valid one accepted by both.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { requestBodySchema, schemaChecker, servedDocument, type OpenApiDocument } from './support/openapi-document.ts';
import { createTemplateAs, sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

interface Ctx { world: TemplateWorld; doc: OpenApiDocument; templateId: string }
const test = suite<Ctx>('OpenAPI: template variables');

test.before(async (ctx) => {
  ctx.world = await templateWorld('embedded');
  ctx.doc = await servedDocument(ctx.world.t);
  ctx.templateId = (await createTemplateAs(ctx.world, { slug: 'welcome', subject: 'Hi {{name}}', text: 'Hello {{name}}' })).id;
});
test.after(async ({ world }) => {
  await world?.t.close();
});

const VARIABLES: Array<[string, unknown]> = [
  ['valid', { name: 'Ann' }],
  ['a string', 'Ann'],
  ['an array', ['Ann']],
  ['a nested object', { name: { first: 'Ann' } }],
  ['a null value', { name: null }],
  ['101 variables', Object.fromEntries(Array.from({ length: 101 }, (_, i) => [i === 0 ? 'name' : `v${i}`, 'x']))],
  ['a name beginning with a digit', { name: 'Ann', '1st': 'x' }],
  ['a name of 65 characters', { name: 'Ann', [`a${'b'.repeat(64)}`]: 'x' }],
  ['a value of 10,001 characters', { name: 'x'.repeat(10_001) }],
];

test('the document accepts exactly the variables the API accepts, in a template send, a preview and a test send', async ({ world, doc, templateId }) => {
  const { t, apiKey, owner, projectId, domain } = world;
  const compile = schemaChecker(doc);
  const operations = [
    {
      name: 'POST /v1/emails (template send)',
      check: compile(requestBodySchema(doc, 'post', '/v1/emails')),
      body: (variables: unknown) => ({ from: `app@${domain}`, to: `ann@${domain}`, template: 'welcome', variables }),
      send: (body: unknown) => sendEmail(t, apiKey, body),
    },
    {
      name: 'POST /v1/templates/preview',
      check: compile(requestBodySchema(doc, 'post', '/v1/templates/preview')),
      body: (variables: unknown) => ({ subject: 'Hi {{name}}', text: 'Hello {{name}}', variables }),
      send: (body: unknown) => templates(t, 'POST', '/v1/templates/preview', { as: owner, projectId, body }),
    },
    {
      name: 'POST /v1/templates/{id}/test',
      check: compile(requestBodySchema(doc, 'post', '/v1/templates/{id}/test')),
      body: (variables: unknown) => ({ from: `app@${domain}`, to: `ann@${domain}`, variables }),
      send: (body: unknown) => templates(t, 'POST', `/v1/templates/${templateId}/test`, { as: owner, projectId, body }),
    },
  ];
  const disagreements: string[] = [];
  for (const operation of operations) {
    for (const [label, variables] of VARIABLES) {
      const body = operation.body(variables);
      const response = await operation.send(body);
      const accepted = response.statusCode >= 200 && response.statusCode < 300;
      if (!accepted) assert.is(response.statusCode, 422, `${operation.name}, ${label}: ${response.body}`);
      if (operation.check(body) !== accepted) {
        disagreements.push(`${operation.name}, variables ${label}: the document ${accepted ? 'refuses' : 'accepts'} them, the API answers ${response.statusCode} ${response.body.slice(0, 110)}`);
      }
    }
  }
  assert.equal(disagreements, [], disagreements.join('\n'));
});

test.run();
