// The contract requires a body in every message and every saved template (SendEmail: "at least
// one of html or text must be present and nonempty"; TemplateContent and TemplateUpdate: "At
// least one of html or text must be a nonempty string"), and the API enforces it with 400
// validation_error, after the schema and with a message of its own. The OpenAPI document states
// the rule in JSON Schema 2020-12 too: the request schemas of POST /v1/emails (the direct send),
// POST /v1/templates and PATCH /v1/templates/{id} each require a nonempty html or text (`anyOf`:
// html a string of at least one character, or text), beside html and text optional and, for
// templates, nullable. So a body checked against the document before it is sent ({from, to,
// subject} alone, text "", html and text null) is refused there as the API refuses it, and a
// generated client can tell that one of the two is needed. Each body below goes to the API and
// through the served document (Ajv), and both must agree.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { requestBodySchema, schemaChecker, servedDocument, type OpenApiDocument } from './support/openapi-document.ts';
import { createTemplateAs, sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

interface Ctx { world: TemplateWorld; doc: OpenApiDocument }
const test = suite<Ctx>('OpenAPI: a message or template needs html or text');

test.before(async (ctx) => {
  ctx.world = await templateWorld('embedded');
  ctx.doc = await servedDocument(ctx.world.t);
});
test.after(async ({ world }) => {
  await world?.t.close();
});

const BODIES: Array<[string, Record<string, unknown>]> = [
  ['text only', { text: 'Hello' }],
  ['html only', { html: '<p>Hello</p>' }],
  ['neither html nor text', {}],
  ['an empty text', { text: '' }],
  ['an empty html and an empty text', { html: '', text: '' }],
  ['html and text null', { html: null, text: null }],
  ['an empty html beside a null text', { html: '', text: null }],
];

test('the document accepts exactly the direct sends and template contents the API accepts', async ({ world, doc }) => {
  const { t, apiKey, owner, projectId, domain } = world;
  const compile = schemaChecker(doc);
  const existing = await createTemplateAs(world, { slug: 'existing', subject: 'Hi', text: 'Hello' });
  let revision = existing.revision;
  let slug = 0;
  const operations = [
    {
      name: 'POST /v1/emails',
      check: compile(requestBodySchema(doc, 'post', '/v1/emails')),
      body: (content: Record<string, unknown>) => ({ from: `app@${domain}`, to: `ann@${domain}`, subject: 'Hi', ...content }),
      send: (body: unknown) => sendEmail(t, apiKey, body),
    },
    {
      name: 'POST /v1/templates',
      check: compile(requestBodySchema(doc, 'post', '/v1/templates')),
      body: (content: Record<string, unknown>) => ({ name: 'Welcome', slug: `welcome-${++slug}`, subject: 'Hi', ...content }),
      send: (body: unknown) => templates(t, 'POST', '/v1/templates', { as: owner, projectId, body }),
    },
    {
      name: 'PATCH /v1/templates/{id}',
      check: compile(requestBodySchema(doc, 'patch', '/v1/templates/{id}')),
      body: (content: Record<string, unknown>) => ({ name: 'Existing', slug: 'existing', subject: 'Hi', revision, ...content }),
      send: async (body: unknown) => {
        const response = await templates(t, 'PATCH', `/v1/templates/${existing.id}`, { as: owner, projectId, body });
        if (response.statusCode === 200) revision = response.json().revision;
        return response;
      },
    },
  ];
  const disagreements: string[] = [];
  for (const operation of operations) {
    for (const [label, content] of BODIES) {
      const body = operation.body(content);
      const response = await operation.send(body);
      const accepted = response.statusCode >= 200 && response.statusCode < 300;
      if (!accepted) assert.is(response.statusCode, 400, `${operation.name}, ${label}: ${response.body}`);
      if (operation.check(body) !== accepted) {
        disagreements.push(`${operation.name} with ${label}: the document ${accepted ? 'refuses' : 'accepts'} it, the API answers ${response.statusCode} ${response.body.slice(0, 120)}`);
      }
    }
  }
  assert.equal(disagreements, [], disagreements.join('\n'));
});

test.run();
