// Who may do what on the management API: sessions, workspace membership and roles, the
// dashboard Origin rule, sign-in and sign-out. Everything through HTTP on the real app.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { createUser } from '../apps/services/management/users.ts';
import { SESSION_IDLE_MS, SESSION_MAX_MS } from '../domain/management.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { addMember, call, errorCode, newCaller, PASSWORD, sessionCookieFrom, signIn, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx {
  t: TestApp;
  owner: Caller;
  admin: Caller;
  developer: Caller;
  viewer: Caller;
  outsider: Caller;
  workspaceId: string;
  projectId: string;
  domainId: string;
  keyId: string;
  otherWorkspaceId: string;
  otherProjectId: string;
}

const authz = suite<Ctx>('management authorization');

authz.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test' });
  const t = ctx.t;
  ctx.owner = await newCaller(t, 'owner@acme.test');
  ctx.admin = await newCaller(t, 'admin@acme.test');
  ctx.developer = await newCaller(t, 'dev@acme.test');
  ctx.viewer = await newCaller(t, 'viewer@acme.test');
  ctx.outsider = await newCaller(t, 'someone@elsewhere.test');
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(t, ctx.owner));
  ({ workspaceId: ctx.otherWorkspaceId, projectId: ctx.otherProjectId } = await workspaceWithProject(t, ctx.outsider));
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.admin, 'admin');
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.developer, 'developer');
  await addMember(t, ctx.owner, ctx.workspaceId, ctx.viewer, 'viewer');
  const domain = await call(t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name: 'acme.test' } });
  ctx.domainId = domain.json().id;
  await markDomainVerified(t.ctx.documents, ctx.domainId, 'test fixture', t.ctx.now());
  const key = await call(t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'ci', permissions: ['email:send'] } });
  ctx.keyId = key.json().id;
});

authz.after(async (ctx) => {
  await ctx.t.close();
});

type Method = 'GET' | 'POST' | 'DELETE';
/** Every management route, with a body that would be valid, so only authentication can refuse it. */
function routes(ctx: Ctx): Array<[Method, string, unknown?]> {
  const ws = ctx.workspaceId;
  return [
    ['GET', '/v1/session'],
    ['DELETE', '/v1/session'],
    ['POST', '/v1/workspaces', { name: 'New' }],
    ['GET', '/v1/workspaces'],
    ['GET', `/v1/workspaces/${ws}`],
    ['POST', `/v1/workspaces/${ws}/members`, { email: 'viewer@acme.test', role: 'viewer' }],
    ['POST', `/v1/workspaces/${ws}/projects`, { name: 'Another', environment: 'development' }],
    ['GET', `/v1/workspaces/${ws}/projects`],
    ['GET', `/v1/projects/${ctx.projectId}`],
    ['POST', `/v1/workspaces/${ws}/domains`, { name: 'other.test' }],
    ['GET', `/v1/workspaces/${ws}/domains`],
    ['GET', `/v1/domains/${ctx.domainId}`],
    ['POST', `/v1/domains/${ctx.domainId}/verify`],
    ['POST', `/v1/domains/${ctx.domainId}/dkim-rotation`],
    ['DELETE', `/v1/domains/${ctx.domainId}/dkim-rotation`],
    ['POST', `/v1/domains/${ctx.domainId}/projects/${ctx.projectId}`],
    ['DELETE', `/v1/domains/${ctx.domainId}/projects/${ctx.projectId}`],
    ['POST', `/v1/projects/${ctx.projectId}/api-keys`, { name: 'k', permissions: ['email:read'] }],
    ['GET', `/v1/projects/${ctx.projectId}/api-keys`],
    ['DELETE', `/v1/api-keys/${ctx.keyId}`],
    ['GET', `/v1/workspaces/${ws}/suppressions`],
    ['POST', `/v1/workspaces/${ws}/suppressions`, { address: 'x@y.test' }],
    ['DELETE', `/v1/workspaces/${ws}/suppressions/x@y.test`],
    ['GET', '/v1/invitations'],
    ['POST', '/v1/invitations/inv_00000000000000000000000000000000/accept'],
    ['DELETE', '/v1/invitations/inv_00000000000000000000000000000000'],
  ];
}

authz('without a session every management route answers 401 session_required', async (ctx) => {
  for (const [method, url, body] of routes(ctx)) {
    for (const as of [null, 'rr_session=not-a-real-token', `rr_session=${'A'.repeat(43)}`]) {
      const response = await call(ctx.t, method, url, { as, body });
      assert.is(response.statusCode, 401, `${method} ${url} with ${as}: ${response.body}`);
      assert.is(errorCode(response), 'session_required');
    }
  }
});

authz('authentication comes before validation: an anonymous bad body is 401, not 400', async (ctx) => {
  const response = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/projects`, { body: { nonsense: true } });
  assert.is(response.statusCode, 401);
});

authz('a member of another workspace is refused with 403 forbidden, reads and writes alike', async (ctx) => {
  const outsider = ctx.outsider;
  // The caller's own session, workspaces and invitations are not the workspace's.
  for (const [method, url, body] of routes(ctx).filter(([, url]) => !url.startsWith('/v1/session') && !url.startsWith('/v1/invitations') && url !== '/v1/workspaces')) {
    const response = await call(ctx.t, method, url, { as: outsider, body });
    assert.is(response.statusCode, 403, `${method} ${url}: ${response.body}`);
    assert.is(errorCode(response), 'forbidden');
  }
  // Their own workspace list does not show ours.
  const list = await call(ctx.t, 'GET', '/v1/workspaces', { as: outsider });
  assert.equal(list.json().workspaces.map((w: { id: string }) => w.id), [ctx.otherWorkspaceId]);
});

authz('connecting a domain to a project of another workspace is refused', async (ctx) => {
  // The owner is not a member of the outsider's workspace: 403.
  const foreign = await call(ctx.t, 'POST', `/v1/domains/${ctx.domainId}/projects/${ctx.otherProjectId}`, { as: ctx.owner });
  assert.is(foreign.statusCode, 403);
  const domain = await call(ctx.t, 'GET', `/v1/domains/${ctx.domainId}`, { as: ctx.owner });
  assert.not.ok(domain.json().projectIds.includes(ctx.otherProjectId));
});

authz('unknown ids are 404 not_found, not 403', async (ctx) => {
  for (const url of ['/v1/workspaces/ws_nope', '/v1/projects/prj_nope', '/v1/domains/dom_nope', '/v1/projects/prj_nope/api-keys']) {
    const response = await call(ctx.t, 'GET', url, { as: ctx.owner });
    assert.is(response.statusCode, 404, url);
    assert.is(errorCode(response), 'not_found');
  }
});

authz('a viewer reads everything in the workspace and changes nothing', async (ctx) => {
  const { t, viewer, workspaceId: ws, projectId, domainId, keyId } = ctx;
  for (const url of [
    `/v1/workspaces/${ws}`, `/v1/workspaces/${ws}/projects`, `/v1/projects/${projectId}`, `/v1/workspaces/${ws}/domains`,
    `/v1/domains/${domainId}`, `/v1/projects/${projectId}/api-keys`, `/v1/workspaces/${ws}/suppressions`,
  ]) {
    const response = await call(t, 'GET', url, { as: viewer });
    assert.is(response.statusCode, 200, `${url}: ${response.body}`);
  }
  const writes: Array<[Method, string, unknown?]> = [
    ['POST', `/v1/workspaces/${ws}/projects`, { name: 'By viewer', environment: 'development' }],
    ['POST', `/v1/projects/${projectId}/api-keys`, { name: 'By viewer', permissions: ['email:send'] }],
    ['POST', `/v1/workspaces/${ws}/domains`, { name: 'viewer.test' }],
    ['POST', `/v1/domains/${domainId}/verify`],
    ['POST', `/v1/domains/${domainId}/dkim-rotation`],
    ['DELETE', `/v1/domains/${domainId}/dkim-rotation`],
    ['POST', `/v1/domains/${domainId}/projects/${projectId}`],
    ['DELETE', `/v1/domains/${domainId}/projects/${projectId}`],
    ['DELETE', `/v1/api-keys/${keyId}`],
    ['POST', `/v1/workspaces/${ws}/suppressions`, { address: 'blocked@x.test' }],
    ['POST', `/v1/workspaces/${ws}/members`, { email: 'someone@elsewhere.test', role: 'viewer' }],
  ];
  for (const [method, url, body] of writes) {
    const response = await call(t, method, url, { as: viewer, body });
    assert.is(response.statusCode, 403, `${method} ${url}: ${response.body}`);
    assert.is(errorCode(response), 'forbidden');
  }
  // Nothing was written.
  const projects = await call(t, 'GET', `/v1/workspaces/${ws}/projects`, { as: viewer });
  assert.not.ok(projects.json().projects.some((p: { name: string }) => p.name === 'By viewer'));
  const keys = await call(t, 'GET', `/v1/projects/${projectId}/api-keys`, { as: viewer });
  assert.not.ok(keys.json().apiKeys.some((k: { name: string }) => k.name === 'By viewer'));
  assert.is(keys.json().apiKeys.find((k: { id: string }) => k.id === keyId).revokedAt, null);
});

authz('a developer creates keys, projects and domains but may not touch suppressions or members', async (ctx) => {
  const { t, developer, workspaceId: ws, projectId } = ctx;
  const key = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: developer, body: { name: 'dev key', permissions: ['email:send', 'email:read'] } });
  assert.is(key.statusCode, 201, key.body);
  const project = await call(t, 'POST', `/v1/workspaces/${ws}/projects`, { as: developer, body: { name: 'Dev project', environment: 'development' } });
  assert.is(project.statusCode, 201, project.body);
  for (const [method, url, body] of [
    ['POST', `/v1/workspaces/${ws}/suppressions`, { address: 'dev-block@x.test' }],
    ['DELETE', `/v1/workspaces/${ws}/suppressions/dev-block@x.test`],
    ['POST', `/v1/workspaces/${ws}/members`, { email: 'someone@elsewhere.test', role: 'viewer' }],
  ] as Array<[Method, string, unknown?]>) {
    const response = await call(t, method, url, { as: developer, body });
    assert.is(response.statusCode, 403, `${method} ${url}: ${response.body}`);
    assert.is(errorCode(response), 'forbidden');
  }
  const list = await call(t, 'GET', `/v1/workspaces/${ws}/suppressions`, { as: developer });
  assert.is(list.statusCode, 200);
});

authz('owners and admins manage suppressions; admins may add members but not owners', async (ctx) => {
  const { t, owner, admin, workspaceId: ws } = ctx;
  for (const who of [owner, admin]) {
    const address = `blocked-by-${who.email}`;
    const added = await call(t, 'POST', `/v1/workspaces/${ws}/suppressions`, { as: who, body: { address } });
    assert.is(added.statusCode, 201, added.body);
    const removed = await call(t, 'DELETE', `/v1/workspaces/${ws}/suppressions/${encodeURIComponent(address)}`, { as: who });
    assert.is(removed.statusCode, 200, removed.body);
  }
  const newcomer = await newCaller(t, 'newcomer@acme.test');
  const asOwner = await call(t, 'POST', `/v1/workspaces/${ws}/members`, { as: admin, body: { email: newcomer.email, role: 'owner' } });
  assert.is(asOwner.statusCode, 403);
  assert.is(errorCode(asOwner), 'forbidden');
  const asDeveloper = await call(t, 'POST', `/v1/workspaces/${ws}/members`, { as: admin, body: { email: newcomer.email, role: 'developer' } });
  assert.is(asDeveloper.statusCode, 201, asDeveloper.body);
  assert.equal((await call(t, 'GET', '/v1/workspaces', { as: newcomer })).json().workspaces, [], 'invited, not yet a member');
  const accepted = await call(t, 'POST', `/v1/invitations/${asDeveloper.json().id}/accept`, { as: newcomer });
  assert.is(accepted.statusCode, 200, accepted.body);
  const mine = await call(t, 'GET', '/v1/workspaces', { as: newcomer });
  assert.equal(mine.json().workspaces.map((w: { id: string; role: string }) => [w.id, w.role]), [[ws, 'developer']]);
});

authz('a foreign Origin may not change anything; the dashboard Origin and no Origin may', async (ctx) => {
  const { t, owner, workspaceId: ws } = ctx;
  const create = (name: string, headers: Record<string, string>) =>
    call(t, 'POST', `/v1/workspaces/${ws}/projects`, { as: owner, body: { name, environment: 'development' }, headers });

  const foreign: Array<Record<string, string>> = [
    { origin: 'https://evil.test' },
    { origin: 'https://dashboard.relay.test.evil.test' },
    { origin: 'http://dashboard.relay.test' },
    { origin: 'null' },
    { 'sec-fetch-site': 'cross-site' },
  ];
  for (const headers of foreign) {
    const response = await create(`Foreign ${JSON.stringify(headers)}`, headers);
    assert.is(response.statusCode, 403, `${JSON.stringify(headers)}: ${response.body}`);
    assert.is(errorCode(response), 'origin_not_allowed');
  }
  const revoke = await call(t, 'DELETE', `/v1/api-keys/${ctx.keyId}`, { as: owner, headers: { origin: 'https://evil.test' } });
  assert.is(revoke.statusCode, 403);
  assert.is(errorCode(revoke), 'origin_not_allowed');

  assert.is((await create('From dashboard', { origin: 'https://dashboard.relay.test' })).statusCode, 201);
  assert.is((await create('Same site fetch', { 'sec-fetch-site': 'same-origin', origin: 'https://dashboard.relay.test' })).statusCode, 201);
  assert.is((await create('From curl', {})).statusCode, 201);
  // Reading from elsewhere changes nothing, so it is not refused.
  const read = await call(t, 'GET', `/v1/workspaces/${ws}/projects`, { as: owner, headers: { origin: 'https://evil.test' } });
  assert.is(read.statusCode, 200);
  assert.not.ok(read.json().projects.some((p: { name: string }) => p.name.startsWith('Foreign')));

  // Signing in is a write too (login CSRF).
  const login = await call(t, 'POST', '/v1/session', { body: { email: owner.email, password: PASSWORD }, headers: { origin: 'https://evil.test' } });
  assert.is(login.statusCode, 403);
  assert.is(errorCode(login), 'origin_not_allowed');
  assert.is(login.headers['set-cookie'], undefined);
});

authz('wrong credentials are 401 invalid_credentials and do not tell whether the user exists', async (ctx) => {
  const { t, owner } = ctx;
  const wrongPassword = await call(t, 'POST', '/v1/session', { body: { email: owner.email, password: 'not the password at all' } });
  const noSuchUser = await call(t, 'POST', '/v1/session', { body: { email: 'nobody@acme.test', password: 'not the password at all' } });
  for (const response of [wrongPassword, noSuchUser]) {
    assert.is(response.statusCode, 401);
    assert.is(errorCode(response), 'invalid_credentials');
    assert.is(response.headers['set-cookie'], undefined);
  }
  assert.is(wrongPassword.body, noSuchUser.body);
  // Emails compare case-insensitively and trimmed.
  assert.ok((await signIn(t, '  OWNER@Acme.Test ')).startsWith('rr_session='));
});

authz('the session cookie is HttpOnly, SameSite=Lax, Path=/ and the database keeps only its hash', async (ctx) => {
  const { t, owner } = ctx;
  const response = await call(t, 'POST', '/v1/session', { body: { email: owner.email, password: PASSWORD } });
  const header = String(response.headers['set-cookie']);
  assert.match(header, /^rr_session=[A-Za-z0-9_-]{43};/);
  assert.match(header, /HttpOnly/);
  assert.match(header, /SameSite=Lax/);
  assert.match(header, /Path=\//);
  // Secure follows the dashboard's origin, https here, not the environment (test/session-cookie-secure.int.test.ts).
  assert.match(header, /Secure/, 'the dashboard is at an https origin');
  const token = sessionCookieFrom(response).split('=')[1];
  const stored = await t.ctx.documents.collection('sessions').find({});
  assert.ok(stored.length > 0);
  assert.not.ok(JSON.stringify(stored).includes(token));
  const me = await call(t, 'GET', '/v1/session', { as: sessionCookieFrom(response) });
  assert.is(me.json().user.email, owner.email);
  assert.equal(me.json().memberships.map((m: { role: string }) => m.role), ['owner']);
});

authz('signing out ends that session only', async (ctx) => {
  const { t, owner } = ctx;
  const first = await signIn(t, owner.email);
  const second = await signIn(t, owner.email);
  const out = await call(t, 'DELETE', '/v1/session', { as: first });
  assert.is(out.statusCode, 200);
  assert.match(String(out.headers['set-cookie']), /rr_session=;/);
  const after = await call(t, 'GET', '/v1/workspaces', { as: first });
  assert.is(after.statusCode, 401);
  assert.is(errorCode(after), 'session_required');
  assert.is((await call(t, 'DELETE', '/v1/session', { as: first })).statusCode, 401);
  assert.is((await call(t, 'GET', '/v1/workspaces', { as: second })).statusCode, 200);
});

authz('sessions slide with use, end when idle, and never outlive the absolute cap', async (ctx) => {
  const { t, owner } = ctx;
  const day = 24 * 3600_000;
  const idle = await signIn(t, owner.email);
  const active = await signIn(t, owner.email);
  const start = t.clock.offsetMs;
  try {
    // Active: used every 10 days, so always within the 14-day idle window.
    let used = 0;
    while (used + 10 * day < SESSION_MAX_MS) {
      t.clock.advance(10 * day);
      used += 10 * day;
      assert.is((await call(t, 'GET', '/v1/session', { as: active })).statusCode, 200, `active after ${used / day} days`);
    }
    assert.is((await call(t, 'GET', '/v1/session', { as: idle })).statusCode, 401, 'idle beyond 14 days');
    assert.ok(used > SESSION_IDLE_MS);
    t.clock.advance(SESSION_MAX_MS - used + 1000);
    assert.is((await call(t, 'GET', '/v1/session', { as: active })).statusCode, 401, 'past the absolute cap');
  } finally {
    t.clock.offsetMs = start;
  }
});

authz.run();

const production = suite<{ t: TestApp }>('management authorization in production');

production.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test' });
});
production.after(async (ctx) => {
  await ctx.t.close();
});

production('production uses the __Host- cookie, Secure, and ignores the development name', async ({ t }) => {
  await createUser(t.ctx.documents, { email: 'prod@acme.test', password: PASSWORD }, t.ctx.now());
  const login = await call(t, 'POST', '/v1/session', { body: { email: 'prod@acme.test', password: PASSWORD } });
  assert.is(login.statusCode, 200);
  const header = String(login.headers['set-cookie']);
  assert.match(header, /^__Host-rr_session=[A-Za-z0-9_-]{43};/);
  assert.match(header, /Secure/);
  assert.match(header, /Path=\//);
  assert.not.match(header, /Domain=/);
  const cookie = sessionCookieFrom(login, '__Host-rr_session');
  assert.is((await call(t, 'GET', '/v1/session', { as: cookie })).statusCode, 200);
  const token = cookie.split('=')[1];
  assert.is((await call(t, 'GET', '/v1/session', { as: `rr_session=${token}` })).statusCode, 401);
});

production.run();
