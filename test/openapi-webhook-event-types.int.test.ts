// A webhook endpoint subscribes to the event types of the contract (Events, Payload: "type ...
// One of email.sent, email.delivered, email.bounced, email.complained, email.rejected,
// email.failed, email.delayed, email.suppressed"), and the API answers 400 validation_error to
// any other, with the service's message naming the value. The OpenAPI document enumerates them:
// `events.items` of POST /v1/projects/{projectId}/webhook-endpoints and PATCH
// /v1/webhook-endpoints/{id} is the union of exactly the types the API subscribes to
// (domain/webhooks/events.ts WEBHOOK_EVENT_TYPES), so a generated client gets the enumeration and
// a request validated against the document before it is sent (`email.queued`, a status rather
// than an event type, or a typo) is refused there as the server refuses it, and each contract
// type accepted by both.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { requestBodySchema, schemaChecker, servedDocument, type OpenApiDocument } from './support/openapi-document.ts';

// The receiver is never reached: no email is sent. RELAY_WEBHOOK_ALLOW lets a local https URL be an endpoint.
const URL_ALLOWED = 'https://localhost:9/relay';
const CONTRACT_TYPES = ['email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.rejected', 'email.failed', 'email.delayed', 'email.suppressed'];

/** The service's refusal, naming the value (the document enumerates the types; the API words the answer). */
function assertRefusedType(response: { statusCode: number; body: string }, type: string) {
  assert.is(response.statusCode, 400, response.body);
  assert.equal(JSON.parse(response.body).error, {
    code: 'validation_error',
    message: `body.events: ${JSON.stringify(type)} is not an event type (${CONTRACT_TYPES.join(', ')})`,
  });
}

interface Ctx { t: TestApp; doc: OpenApiDocument; owner: Caller; projectId: string; endpointId: string }
const test = suite<Ctx>('OpenAPI: webhook endpoint event types');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test', RELAY_WEBHOOK_ALLOW: 'localhost:9' });
  ctx.doc = await servedDocument(ctx.t);
  ctx.owner = await newCaller(ctx.t, 'hooks-owner@acme.test');
  ctx.projectId = (await workspaceWithProject(ctx.t, ctx.owner)).projectId;
  const created = await call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.owner, body: { url: URL_ALLOWED, events: ['email.sent'] } });
  assert.is(created.statusCode, 201, created.body);
  ctx.endpointId = created.json().id;
});
test.after(async ({ t }) => {
  await t?.close();
});

test('the document accepts exactly the event types the API accepts, on creation and on update', async ({ t, doc, owner, projectId, endpointId }) => {
  const compile = schemaChecker(doc);
  const createSchema = compile(requestBodySchema(doc, 'post', '/v1/projects/{projectId}/webhook-endpoints'));
  const updateSchema = compile(requestBodySchema(doc, 'patch', '/v1/webhook-endpoints/{id}'));
  const disagreements: string[] = [];
  for (const type of [...CONTRACT_TYPES, 'email.queued', 'email.processing', 'email.opened', 'email.sent ', 'EMAIL.SENT']) {
    const create = { url: URL_ALLOWED, events: [type] };
    const created = await call(t, 'POST', `/v1/projects/${projectId}/webhook-endpoints`, { as: owner, body: create });
    // Creations that succeed are removed, so the 20 endpoints of a project are never reached.
    if (created.statusCode === 201) assert.is((await call(t, 'DELETE', `/v1/webhook-endpoints/${created.json().id}`, { as: owner })).statusCode, 200);
    else assertRefusedType(created, type);
    if (createSchema(create) !== (created.statusCode === 201)) {
      disagreements.push(`POST events ${JSON.stringify([type])}: the document ${createSchema(create) ? 'accepts' : 'refuses'} it, the API answers ${created.statusCode} ${created.body.slice(0, 120)}`);
    }
    const update = { events: [type] };
    const updated = await call(t, 'PATCH', `/v1/webhook-endpoints/${endpointId}`, { as: owner, body: update });
    if (updated.statusCode !== 200) assertRefusedType(updated, type);
    if (updateSchema(update) !== (updated.statusCode === 200)) {
      disagreements.push(`PATCH events ${JSON.stringify([type])}: the document ${updateSchema(update) ? 'accepts' : 'refuses'} it, the API answers ${updated.statusCode} ${updated.body.slice(0, 120)}`);
    }
  }
  assert.equal(disagreements, [], disagreements.join('\n'));
});

test.run();
