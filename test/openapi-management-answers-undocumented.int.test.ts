// The OpenAPI document describes every answer of the management API (outside the contract,
// which leaves "other dashboard management" out; apps/api/MANAGEMENT-API.md is Relay's own
// contract for it, and says its routes are in openapi.json with their schemas). Each operation
// of apps/api/plugins/{session,workspaces,projects,domains,api-keys,suppressions,
// webhook-endpoints,outbox}.ts documents its own success status (201 for a creation, 200
// otherwise) with a JSON schema of the body (components.schemas names the resources: Workspace,
// Project, Domain, ApiKey, …), so that a generated client has a type for each answer (the id of
// a created workspace, project or key, the one-time `secret` of a new key or webhook endpoint)
// and a contract tester can check them. Real answers, made through the API, are validated here
// against the served document with an independent validator (Ajv), as
// test/openapi.int.test.ts does for the email and template operations: the calls of a
// workspace's life, and a domain's through DNS verification, key rotation and connections.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LightMyRequestResponse } from 'fastify';
import type { DomainView } from '../apps/services/management/domains.ts';
import { createUser } from '../apps/services/management/users.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { call, newCaller, PASSWORD, workspaceWithProject } from './support/management.ts';
import { schemaChecker, servedDocument, type OpenApiDocument } from './support/openapi-document.ts';

interface Ctx { t: TestApp; dns: TestDnsServer; doc: OpenApiDocument }
const test = suite<Ctx>('OpenAPI: the management API\'s answers');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.t = await startTestApp(
    { RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test', RELAY_WEBHOOK_ALLOW: 'localhost:9', RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: 'mx.relay.test' },
    { processors: true },
  );
  ctx.doc = await servedDocument(ctx.t);
});
test.after(async ({ t, dns }) => {
  await t?.close();
  await dns?.close();
});

/** `documented(method, path, response)` checks a real answer against the document (its status, its body); `state` counts them and keeps the problems. */
function answerChecker(doc: OpenApiDocument) {
  const compile = schemaChecker(doc);
  const state = { checked: 0, problems: [] as string[] };
  const documented = (method: string, path: string, response: LightMyRequestResponse) => {
    const where = `${method} ${path} → ${response.statusCode}`;
    assert.ok(response.statusCode >= 200 && response.statusCode < 300, `${where}: ${response.body}`);
    state.checked++;
    const responses = doc.paths[path]?.[method.toLowerCase()]?.responses;
    assert.ok(responses, `${method} ${path} is in the document`);
    const schema = responses[String(response.statusCode)]?.content?.['application/json']?.schema;
    if (!schema) {
      state.problems.push(`${where}: no schema for the body of a ${response.statusCode} (documented: ${Object.keys(responses).join(', ')}), which is ${response.body.slice(0, 90)}`);
      return;
    }
    const validate = compile(schema);
    if (!validate(response.json())) state.problems.push(`${where}: the body does not validate: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  };
  return { documented, state };
}

test('each successful management answer is documented with its status and a JSON schema it validates against', async ({ t, doc }) => {
  const { documented, state } = answerChecker(doc);
  await createUser(t.ctx.documents, { email: 'signing-in@acme.test', password: PASSWORD }, t.ctx.now());
  const signIn = await call(t, 'POST', '/v1/session', { body: { email: 'signing-in@acme.test', password: PASSWORD } });
  documented('POST', '/v1/session', signIn);
  const owner = await newCaller(t, 'owner@acme.test');
  const invited = await newCaller(t, 'invited@acme.test');
  const as = { as: owner };
  documented('GET', '/v1/session', await call(t, 'GET', '/v1/session', as));

  const workspace = await call(t, 'POST', '/v1/workspaces', { ...as, body: { name: 'Acme' } });
  documented('POST', '/v1/workspaces', workspace);
  const workspaceId = workspace.json().id as string;
  documented('GET', '/v1/workspaces', await call(t, 'GET', '/v1/workspaces', as));
  documented('GET', '/v1/workspaces/{id}', await call(t, 'GET', `/v1/workspaces/${workspaceId}`, as));
  const invitation = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { ...as, body: { email: invited.email, role: 'developer' } });
  documented('POST', '/v1/workspaces/{id}/members', invitation);
  documented('GET', '/v1/invitations', await call(t, 'GET', '/v1/invitations', { as: invited }));
  documented('POST', '/v1/invitations/{id}/accept', await call(t, 'POST', `/v1/invitations/${invitation.json().id}/accept`, { as: invited }));
  documented('PATCH', '/v1/workspaces/{id}/members/{userId}', await call(t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${invited.userId}`, { ...as, body: { role: 'viewer' } }));

  const project = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { ...as, body: { name: 'Main', environment: 'development' } });
  documented('POST', '/v1/workspaces/{workspaceId}/projects', project);
  const projectId = project.json().id as string;
  documented('GET', '/v1/workspaces/{workspaceId}/projects', await call(t, 'GET', `/v1/workspaces/${workspaceId}/projects`, as));
  documented('GET', '/v1/projects/{id}', await call(t, 'GET', `/v1/projects/${projectId}`, as));

  const domain = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { ...as, body: { name: 'acme.test' } });
  documented('POST', '/v1/workspaces/{workspaceId}/domains', domain);
  documented('GET', '/v1/workspaces/{workspaceId}/domains', await call(t, 'GET', `/v1/workspaces/${workspaceId}/domains`, as));
  documented('GET', '/v1/domains/{id}', await call(t, 'GET', `/v1/domains/${domain.json().id}`, as));

  const key = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { ...as, body: { name: 'backend', permissions: ['email:send'] } });
  documented('POST', '/v1/projects/{projectId}/api-keys', key);
  documented('GET', '/v1/projects/{projectId}/api-keys', await call(t, 'GET', `/v1/projects/${projectId}/api-keys`, as));
  documented('DELETE', '/v1/api-keys/{id}', await call(t, 'DELETE', `/v1/api-keys/${key.json().id}`, as));

  documented('POST', '/v1/workspaces/{workspaceId}/suppressions', await call(t, 'POST', `/v1/workspaces/${workspaceId}/suppressions`, { ...as, body: { address: 'gone@example.com' } }));
  documented('GET', '/v1/workspaces/{workspaceId}/suppressions', await call(t, 'GET', `/v1/workspaces/${workspaceId}/suppressions`, as));
  documented('DELETE', '/v1/workspaces/{workspaceId}/suppressions/{address}', await call(t, 'DELETE', `/v1/workspaces/${workspaceId}/suppressions/gone@example.com`, as));

  const endpoint = await call(t, 'POST', `/v1/projects/${projectId}/webhook-endpoints`, { ...as, body: { url: 'https://localhost:9/relay', events: ['email.sent'] } });
  documented('POST', '/v1/projects/{projectId}/webhook-endpoints', endpoint);
  const endpointId = endpoint.json().id as string;
  documented('GET', '/v1/projects/{projectId}/webhook-endpoints', await call(t, 'GET', `/v1/projects/${projectId}/webhook-endpoints`, as));
  documented('GET', '/v1/webhook-endpoints/{id}', await call(t, 'GET', `/v1/webhook-endpoints/${endpointId}`, as));
  documented('PATCH', '/v1/webhook-endpoints/{id}', await call(t, 'PATCH', `/v1/webhook-endpoints/${endpointId}`, { ...as, body: { enabled: false } }));
  documented('POST', '/v1/webhook-endpoints/{id}/rotate-secret', await call(t, 'POST', `/v1/webhook-endpoints/${endpointId}/rotate-secret`, as));
  documented('DELETE', '/v1/webhook-endpoints/{id}', await call(t, 'DELETE', `/v1/webhook-endpoints/${endpointId}`, as));

  documented('DELETE', '/v1/workspaces/{id}/members/{userId}', await call(t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${invited.userId}`, as));
  documented('DELETE', '/v1/session', await call(t, 'DELETE', '/v1/session', as));

  assert.is(state.checked, 29, 'every call above was checked');
  assert.equal(state.problems, [], `${state.problems.length} problems in ${state.checked} answers:\n${state.problems.join('\n')}`);
});

/** What a customer who followed the instructions publishes. */
const published = (records: DomainView['records']): ZoneRecord[] => records.map((r): ZoneRecord =>
  r.type === 'MX' ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } } : { name: r.name, type: 'TXT', data: r.txtStrings ?? r.value });

test('a domain through DNS verification, key rotation and connections, a declined invitation and the outbox: documented too', async ({ t, dns, doc }) => {
  const { documented, state } = answerChecker(doc);
  const owner = await newCaller(t, 'domains-owner@acme.test');
  const as = { as: owner };
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);

  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { ...as, body: { name: 'mail.acme.test' } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView;
  // Checked before anything is published: every record missing.
  const missing = await call(t, 'POST', `/v1/domains/${domain.id}/verify`, as);
  assert.is(missing.json().status, 'pending', missing.body);
  documented('POST', '/v1/domains/{id}/verify', missing);
  dns.setZone(published(domain.records));
  const verified = await call(t, 'POST', `/v1/domains/${domain.id}/verify`, as);
  assert.is(verified.json().status, 'verified', verified.body);
  documented('POST', '/v1/domains/{id}/verify', verified);
  documented('POST', '/v1/domains/{id}/projects/{projectId}', await call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, as));

  // A rotation started without a body (the document says it may have none), checked, completed; another one cancelled.
  assert.is(doc.paths['/v1/domains/{id}/dkim-rotation'].post.requestBody?.required, false);
  const rotating = await call(t, 'POST', `/v1/domains/${domain.id}/dkim-rotation`, as);
  documented('POST', '/v1/domains/{id}/dkim-rotation', rotating);
  const checking = await call(t, 'POST', `/v1/domains/${domain.id}/verify`, as);
  assert.is(checking.json().dkimRotation?.check?.status, 'missing', checking.body);
  documented('POST', '/v1/domains/{id}/verify', checking);
  dns.setZone(published([...domain.records, rotating.json().dkimRotation.record]));
  const completed = await call(t, 'POST', `/v1/domains/${domain.id}/verify`, as);
  assert.is(completed.json().retiredDkimKeys.length, 1, completed.body);
  documented('POST', '/v1/domains/{id}/verify', completed);
  assert.is((await call(t, 'POST', `/v1/domains/${domain.id}/dkim-rotation`, { ...as, body: {} })).statusCode, 201);
  documented('DELETE', '/v1/domains/{id}/dkim-rotation', await call(t, 'DELETE', `/v1/domains/${domain.id}/dkim-rotation`, as));
  documented('GET', '/v1/workspaces/{workspaceId}/domains', await call(t, 'GET', `/v1/workspaces/${workspaceId}/domains`, as));

  // The outbox, once an email sent from the domain is written to it; the key list once a key is revoked.
  const key = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { ...as, body: { name: 'sender', permissions: ['email:send'] } });
  const sent = await t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key.json().secret}` },
    payload: { from: `app@${domain.name}`, to: `you@${domain.name}`, subject: 'For the outbox', text: 'hi' },
  });
  assert.is(sent.statusCode, 202, sent.body);
  let outbox = await call(t, 'GET', `/v1/projects/${projectId}/outbox`, as);
  await waitUntil(async () => (outbox = await call(t, 'GET', `/v1/projects/${projectId}/outbox`, as)).json().messages?.length === 1, 'the email is in the outbox');
  documented('GET', '/v1/projects/{projectId}/outbox', outbox);
  assert.is((await call(t, 'DELETE', `/v1/api-keys/${key.json().id}`, as)).statusCode, 200);
  documented('GET', '/v1/projects/{projectId}/api-keys', await call(t, 'GET', `/v1/projects/${projectId}/api-keys?limit=1`, as));

  documented('DELETE', '/v1/domains/{id}/projects/{projectId}', await call(t, 'DELETE', `/v1/domains/${domain.id}/projects/${projectId}`, as));
  const invitation = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { ...as, body: { email: 'declines@acme.test', role: 'viewer' } });
  assert.is(invitation.statusCode, 201, invitation.body);
  documented('DELETE', '/v1/invitations/{id}', await call(t, 'DELETE', `/v1/invitations/${invitation.json().id}`, as));

  assert.is(state.checked, 12, 'every call above was checked');
  assert.equal(state.problems, [], `${state.problems.length} problems in ${state.checked} answers:\n${state.problems.join('\n')}`);
});

test.run();
