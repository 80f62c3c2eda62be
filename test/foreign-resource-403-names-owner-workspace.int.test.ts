// A 403 to a caller who is not a member of a resource's workspace does not name that workspace.
// A signed-in user of tenant B who asks for a project, domain, API key or webhook endpoint of
// tenant A by its id is answered `403 forbidden`; naming tenant A's workspace in the message would
// tell B which of the ids it holds belong to one customer. MANAGEMENT-API.md accepts that a 403
// (against a 404) tells that an id exists, not that the answer hands out the owner's identifiers
// (apps/api/auth/session.ts requireWorkspaceRole).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx {
  t: TestApp;
  owner: Caller;
  outsider: Caller;
  workspaceId: string;
  projectId: string;
  domainId: string;
  keyId: string;
  endpointId: string;
}

const test = suite<Ctx>('a refusal of a foreign resource does not name its workspace');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_WEBHOOK_ALLOW: 'localhost:443' });
  const t = ctx.t;
  ctx.owner = await newCaller(t, 'owner@tenant-a.test');
  ctx.outsider = await newCaller(t, 'owner@tenant-b.test');
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(t, ctx.owner));
  await workspaceWithProject(t, ctx.outsider);
  const domain = await call(t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: 'tenant-a.test' } });
  assert.is(domain.statusCode, 201, domain.body);
  ctx.domainId = domain.json().id;
  await markDomainVerified(t.ctx.documents, ctx.domainId, 'test fixture', t.ctx.now());
  const key = await call(t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'backend', permissions: ['email:send'] } });
  assert.is(key.statusCode, 201, key.body);
  ctx.keyId = key.json().id;
  const endpoint = await call(t, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, {
    as: ctx.owner, body: { url: 'https://localhost/hooks', events: ['email.sent'] },
  });
  assert.is(endpoint.statusCode, 201, endpoint.body);
  ctx.endpointId = endpoint.json().id;
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('tenant B asking for tenant A\'s project, domain, key or endpoint by id is refused without learning A\'s workspace id', async (ctx) => {
  const asked: Array<['GET' | 'POST' | 'DELETE' | 'PATCH', string, unknown?]> = [
    ['GET', `/v1/projects/${ctx.projectId}`],
    ['GET', `/v1/projects/${ctx.projectId}/emails`],
    ['GET', `/v1/templates?projectId=${ctx.projectId}`],
    ['GET', `/v1/domains/${ctx.domainId}`],
    ['DELETE', `/v1/api-keys/${ctx.keyId}`],
    ['GET', `/v1/webhook-endpoints/${ctx.endpointId}`],
    ['PATCH', `/v1/webhook-endpoints/${ctx.endpointId}`, { enabled: false }],
  ];
  const leaks: string[] = [];
  for (const [method, url, body] of asked) {
    const response = await call(ctx.t, method, url, { as: ctx.outsider, body });
    assert.is(response.statusCode, 403, `${method} ${url}: ${response.body}`);
    assert.is(errorCode(response), 'forbidden');
    if (response.body.includes(ctx.workspaceId)) leaks.push(`${method} ${url} → ${response.json().error.message}`);
  }
  assert.equal(leaks, [], `answers that name tenant A's workspace ${ctx.workspaceId} to tenant B:\n${leaks.join('\n')}`);
  // Nothing was changed either.
  const endpoint = await call(ctx.t, 'GET', `/v1/webhook-endpoints/${ctx.endpointId}`, { as: ctx.owner });
  assert.is(endpoint.json().enabled, true);
});

test.run();
