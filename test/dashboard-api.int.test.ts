// The management routes the dashboard added (apps/api/MANAGEMENT-API.md): changing and removing
// members, finding and exporting suppressions, this month's usage, an endpoint's deliveries, and
// "send a test" of a template. Their rules and who may use them, through HTTP on the real app.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createApiKey } from '../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { projectsOf } from '../apps/services/management/projects.ts';
import { fanOut } from '../apps/services/webhooks/deliveries.ts';
import { createEndpoint, getEndpoint } from '../apps/services/webhooks/endpoints.ts';
import type { WebhookEvent } from '../domain/webhooks/events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx {
  t: TestApp;
  owner: Caller; coOwner: Caller; admin: Caller; developer: Caller; viewer: Caller; outsider: Caller;
  workspaceId: string; projectId: string; key: string;
}

const test = suite<Ctx>('dashboard routes of the management API');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_WEBHOOK_ALLOW: 'localhost:443' });
  const t = ctx.t;
  ctx.owner = await newCaller(t, 'owner@d.test');
  ctx.coOwner = await newCaller(t, 'co-owner@d.test');
  ctx.admin = await newCaller(t, 'admin@d.test');
  ctx.developer = await newCaller(t, 'dev@d.test');
  ctx.viewer = await newCaller(t, 'viewer@d.test');
  ctx.outsider = await newCaller(t, 'outsider@elsewhere.test');
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(t, ctx.owner));
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.admin, 'admin');
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.developer, 'developer');
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.viewer, 'viewer');
  await workspaceWithProject(t, ctx.outsider);
  const now = t.ctx.now();
  const domain = await createDomain(t.ctx.documents, { workspaceId: ctx.workspaceId, name: 'd.test' }, now, t.ctx.services.secrets);
  await markDomainVerified(t.ctx.documents, domain._id, 'fixture', now);
  await connectDomain(t.ctx.documents, domain._id, ctx.projectId);
  const project = (await projectsOf(t.ctx.documents).get(ctx.projectId))!;
  ctx.key = (await createApiKey(t.ctx.documents, { project, name: 'Backend', permissions: ['email:send', 'email:read'] }, now)).secret;
});
test.after(async (ctx) => {
  await ctx.t.close();
});

const members = (ctx: Ctx) => `/v1/workspaces/${ctx.workspaceId}/members`;
const roleOf = async (ctx: Ctx, who: Caller) =>
  ((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().members as Array<{ userId: string; role: string }>)
    .find((m) => m.userId === who.userId)?.role;

test('roles: owners change anyone, admins all but owners, others nobody; a workspace keeps an owner', async (ctx) => {
  const patch = (as: Caller, who: Caller, role: string) => call(ctx.t, 'PATCH', `${members(ctx)}/${who.userId}`, { as, body: { role } });
  assert.is(errorCode(await patch(ctx.owner, ctx.owner, 'admin')), 'conflict');
  assert.is((await patch(ctx.viewer, ctx.developer, 'viewer')).statusCode, 403);
  assert.is((await patch(ctx.developer, ctx.viewer, 'developer')).statusCode, 403);
  assert.is((await patch(ctx.admin, ctx.owner, 'viewer')).statusCode, 403);
  assert.is((await patch(ctx.admin, ctx.developer, 'owner')).statusCode, 403);
  assert.is((await patch(ctx.outsider, ctx.developer, 'viewer')).statusCode, 403);
  const changed = await patch(ctx.admin, ctx.developer, 'viewer');
  assert.is(changed.statusCode, 200);
  assert.equal({ ...changed.json(), createdAt: undefined }, { userId: ctx.developer.userId, email: 'dev@d.test', role: 'viewer', createdAt: undefined });
  assert.is(await roleOf(ctx, ctx.developer), 'viewer');
  assert.is((await patch(ctx.owner, ctx.developer, 'developer')).statusCode, 200);
  assert.is((await call(ctx.t, 'PATCH', `${members(ctx)}/usr_nobody`, { as: ctx.owner, body: { role: 'viewer' } })).statusCode, 404);
  assert.is((await call(ctx.t, 'PATCH', `${members(ctx)}/${ctx.viewer.userId}`, { as: ctx.owner, body: { role: 'boss' } })).statusCode, 400);
  // With a second owner, the first may step down.
  await addMember(ctx.t, ctx.owner, ctx.workspaceId, ctx.coOwner, 'owner');
  assert.is((await patch(ctx.owner, ctx.coOwner, 'admin')).statusCode, 200);
  assert.is((await patch(ctx.owner, ctx.coOwner, 'owner')).statusCode, 200);
});

test('removing: owners and admins remove those they may invite; anyone may leave, but not the last owner', async (ctx) => {
  const remove = (as: Caller, who: Caller) => call(ctx.t, 'DELETE', `${members(ctx)}/${who.userId}`, { as });
  assert.is((await remove(ctx.developer, ctx.viewer)).statusCode, 403);
  assert.is((await remove(ctx.admin, ctx.coOwner)).statusCode, 403);
  assert.equal((await remove(ctx.coOwner, ctx.coOwner)).json(), { deleted: true, userId: ctx.coOwner.userId });
  assert.is(errorCode(await remove(ctx.owner, ctx.owner)), 'conflict');
  assert.is((await remove(ctx.admin, ctx.viewer)).statusCode, 200);
  assert.is(await roleOf(ctx, ctx.viewer), undefined);
  // A removed member reads nothing of the workspace any more.
  assert.is((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}/projects`, { as: ctx.viewer })).statusCode, 403);
  assert.is((await remove(ctx.admin, ctx.viewer)).statusCode, 404);
  await addMember(ctx.t, ctx.owner, ctx.workspaceId, ctx.viewer, 'viewer');
});

// INTERFACE-DECISIONS: an address at a Unicode domain is kept in its ASCII form, and a filter
// written in Unicode finds it; the list's prefix too, written with whole labels.
test('suppressions: a prefix written with a Unicode domain finds the address kept in its ASCII form', async (ctx) => {
  const base = `/v1/workspaces/${ctx.workspaceId}/suppressions`;
  const added = await call(ctx.t, 'POST', base, { as: ctx.admin, body: { address: 'kunde@münchen.example' } });
  assert.is(added.statusCode, 201, added.body);
  assert.is(added.json().address, 'kunde@xn--mnchen-3ya.example');
  for (const prefix of ['kunde@xn--mnchen-3ya.example', 'kunde@münchen.example', 'Kunde@München.Example', '"kunde"@münchen.example', 'kunde@münchen', 'kunde@xn--mnch']) {
    const found = await call(ctx.t, 'GET', `${base}?prefix=${encodeURIComponent(prefix)}`, { as: ctx.viewer });
    assert.is(found.statusCode, 200, found.body);
    assert.equal(found.json().suppressions.map((s: { address: string }) => s.address), ['kunde@xn--mnchen-3ya.example'], `prefix ${prefix}`);
  }
});

test('suppressions: found by the beginning of the address, exported whole as CSV that no spreadsheet runs', async (ctx) => {
  const base = `/v1/workspaces/${ctx.workspaceId}/suppressions`;
  for (const address of ['bob@a.test', 'bobby@b.test', 'carol@a.test', '=cmd@a.test', 'x,"y"@a.test']) {
    const added = await call(ctx.t, 'POST', base, { as: ctx.admin, body: { address } });
    assert.ok(added.statusCode === 201 || added.statusCode === 400, `${address}: ${added.body}`);
  }
  const found = await call(ctx.t, 'GET', `${base}?prefix=BOB`, { as: ctx.viewer });
  assert.equal(found.json().suppressions.map((s: { address: string }) => s.address), ['bob@a.test', 'bobby@b.test']);
  const paged = await call(ctx.t, 'GET', `${base}?prefix=bob&limit=1`, { as: ctx.viewer });
  assert.is(paged.json().next_cursor, 'bob@a.test');
  const next = await call(ctx.t, 'GET', `${base}?prefix=bob&limit=1&cursor=bob@a.test`, { as: ctx.viewer });
  assert.equal(next.json(), { suppressions: [next.json().suppressions[0]], next_cursor: null });
  assert.is(next.json().suppressions[0].address, 'bobby@b.test');

  const csv = await call(ctx.t, 'GET', `${base}/export`, { as: ctx.viewer });
  assert.is(csv.statusCode, 200);
  assert.is(csv.headers['content-type'], 'text/csv; charset=utf-8');
  assert.match(String(csv.headers['content-disposition']), /^attachment; filename="suppressions-ws_[a-z0-9_]+\.csv"$/);
  const lines = csv.body.split('\r\n');
  assert.is(lines[0], 'address,reason,email_id,created_at');
  assert.ok(lines.some((l) => /^'=cmd@a\.test,manual,,/.test(l)), 'a formula-like value is defused');
  assert.ok(lines.some((l) => /^bob@a\.test,manual,,\d{4}-\d\d-\d\dT/.test(l)));
  assert.is(lines.at(-1), '');
  assert.is((await call(ctx.t, 'GET', `${base}/export`, { as: ctx.outsider })).statusCode, 403);
});

test('usage: the month\'s recipients against the allowances, by key', async (ctx) => {
  const response = await ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.key}` },
    payload: { from: 'app@d.test', to: ['a@d.test', 'b@d.test'], cc: 'c@d.test', subject: 'Hi', text: 'Hi' },
  });
  assert.is(response.statusCode, 202);
  const usage = (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}/usage`, { as: ctx.viewer })).json();
  const now = ctx.t.ctx.now();
  assert.is(usage.month, now.toISOString().slice(0, 7));
  assert.is(usage.resetsAt, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString());
  assert.equal(usage.recipients, { used: 3, limit: 5000 });
  assert.equal(usage.keys.map((k: { name: string; used: number; limit: number | null; environment: string }) => [k.name, k.used, k.limit, k.environment]), [['Backend', 3, 1000, 'development']]);
  assert.is((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}/usage`, { as: ctx.outsider })).statusCode, 403);
});

test('an endpoint\'s deliveries: newest first, paged, to members of its project only', async (ctx) => {
  const t = ctx.t;
  const { endpoint } = await createEndpoint(t.ctx.documents, t.ctx.services.secrets, { dnsServers: [], allow: t.config.webhookAllow }, {
    workspaceId: ctx.workspaceId, projectId: ctx.projectId, url: 'https://localhost/in', events: ['email.sent'],
  }, new Date());
  const event = (n: number): WebhookEvent => ({
    id: `evt_${n}`, type: 'email.sent', created_at: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    data: { email_id: `em_${n}`, project_id: ctx.projectId, test_mode: true, status: 'sent', recipients: ['a@d.test'], provider_message_id: null },
  });
  for (const n of [1, 2, 3]) await fanOut(t.ctx.documents, [event(n)], [await getEndpoint(t.ctx.documents, endpoint._id)], new Date(Date.UTC(2026, 0, 1, 0, n)));
  const url = `/v1/webhook-endpoints/${endpoint._id}/deliveries`;
  const first = (await call(t, 'GET', `${url}?limit=2`, { as: ctx.viewer })).json();
  assert.equal(first.deliveries.map((d: { emailId: string }) => d.emailId), ['em_3', 'em_2']);
  assert.equal(Object.keys(first.deliveries[0]).sort(), ['attemptLogs', 'attempts', 'createdAt', 'emailId', 'eventId', 'id', 'nextAttemptAt', 'status', 'type', 'updatedAt']);
  assert.is(first.deliveries[0].status, 'pending');
  const second = (await call(t, 'GET', `${url}?limit=2&cursor=${first.next_cursor}`, { as: ctx.viewer })).json();
  assert.equal(second.deliveries.map((d: { emailId: string }) => d.emailId), ['em_1']);
  assert.is(second.next_cursor, null);
  assert.is((await call(t, 'GET', `${url}?cursor=whd_not_this_endpoints`, { as: ctx.viewer })).statusCode, 404);
  assert.is((await call(t, 'GET', url, { as: ctx.outsider })).statusCode, 403);
  assert.is(errorCode(await call(t, 'GET', url)), 'session_required');
});

test('send a test: write roles, the rules of a template send, charged to the member', async (ctx) => {
  const t = ctx.t;
  const created = await call(t, 'POST', `/v1/templates?projectId=${ctx.projectId}`, { as: ctx.developer, body: { name: 'Hi', slug: 'hi', subject: 'Hi {{name}}', text: 'Hello {{name}}' } });
  const url = `/v1/templates/${created.json().id}/test?projectId=${ctx.projectId}`;
  const body = { from: 'Relay test <test@d.test>', to: 'qa@d.test', variables: { name: 'Ada' } };
  assert.is((await call(t, 'POST', url, { as: ctx.viewer, body })).statusCode, 403);
  assert.is(errorCode(await call(t, 'POST', url, { as: ctx.developer, body: { ...body, to: 'someone@elsewhere.test' } })), 'test_recipient_not_allowed');
  assert.is(errorCode(await call(t, 'POST', url, { as: ctx.developer, body: { ...body, from: 'x@unverified.test' } })), 'domain_not_verified');
  assert.is(errorCode(await call(t, 'POST', url, { as: ctx.developer, body: { ...body, variables: ['not', 'an', 'object'] } })), 'invalid_template_variables');
  const sent = await call(t, 'POST', url, { as: ctx.developer, body });
  assert.is(sent.statusCode, 202);
  assert.equal({ ...sent.json(), id: undefined }, { id: undefined, status: 'queued', test_mode: true });
  const email = await call(t, 'GET', `/v1/projects/${ctx.projectId}/emails/${sent.json().id}`, { as: ctx.viewer });
  assert.is(email.json().subject, 'Hi Ada');
  const message = (await call(t, 'GET', `/v1/projects/${ctx.projectId}/emails/${sent.json().id}/message`, { as: ctx.viewer })).json();
  assert.is(message.text, 'Hello Ada');
  const usage = (await call(t, 'GET', `/v1/workspaces/${ctx.workspaceId}/usage`, { as: ctx.viewer })).json();
  assert.ok(usage.keys.some((k: { apiKeyId: string; name: string; used: number }) => k.apiKeyId === ctx.developer.userId && k.name === 'Test sends of dev@d.test' && k.used === 1));
  // A production project sends for real only once the operator has activated the workspace.
  const prod = await call(t, 'POST', `/v1/workspaces/${ctx.workspaceId}/projects`, { as: ctx.owner, body: { name: 'Live', environment: 'production' } });
  const prodTemplate = await call(t, 'POST', `/v1/templates?projectId=${prod.json().id}`, { as: ctx.owner, body: { name: 'Hi', slug: 'hi', subject: 'Hi', text: 'Hi' } });
  const refused = await call(t, 'POST', `/v1/templates/${prodTemplate.json().id}/test?projectId=${prod.json().id}`, { as: ctx.owner, body });
  assert.is(errorCode(refused), 'production_not_enabled');
});

test.run();
