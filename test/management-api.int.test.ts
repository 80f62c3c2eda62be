// The management API's behaviour: creation, validation, conflicts, API key secrets, key
// authentication, suppressions, and domain verification through a real DNS server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { authenticateApiKey, requirePermission } from '../apps/api/auth/bearer.ts';
import { REUSE_MS } from '../apps/services/management/reused-reads.ts';
import { createUser } from '../apps/services/management/users.ts';
import type { ApiKey, SendingDomain } from '../domain/management.ts';
import { setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { sha256Hex } from '../apps/services/management/ids.ts';
import { RelayError } from '../domain/errors.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { addMember, call, errorCode, newCaller, PASSWORD, workspaceWithProject, type Caller } from './support/management.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';

interface Ctx { t: TestApp; dns: TestDnsServer; owner: Caller }

const MAIL_HOST = 'mx.relay.test';

async function rejects(work: Promise<unknown>, code: string): Promise<RelayError> {
  try {
    await work;
  } catch (error) {
    assert.instance(error, RelayError);
    assert.is((error as RelayError).code, code, (error as Error).message);
    return error as RelayError;
  }
  throw new assert.Assertion({ message: `expected ${code}, but it resolved`, generated: false, operator: 'rejects', expects: code, actual: 'resolved' });
}

const api = suite<Ctx>('management API');

api.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST });
});

// An owner of its own for each test: a user creates at most 10 workspaces (MANAGEMENT-API.md, Limits).
let owners = 0;
api.before.each(async (ctx) => {
  ctx.owner = await newCaller(ctx.t, `owner${++owners}@acme.test`);
});

api.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

// ---------------------------------------------------------------------------------------
// Workspaces, members, projects

api('a workspace is created with its creator as owner, inactive, and listed', async ({ t, owner }) => {
  const created = await call(t, 'POST', '/v1/workspaces', { as: owner, body: { name: '  Acme Mail  ' } });
  assert.is(created.statusCode, 201, created.body);
  const ws = created.json();
  assert.match(ws.id, /^ws_[a-z2-7]{26}$/);
  assert.is(ws.name, 'Acme Mail');
  assert.is(ws.activated, false);
  assert.is(ws.role, 'owner');
  const list = await call(t, 'GET', '/v1/workspaces', { as: owner });
  assert.ok(list.json().workspaces.some((w: { id: string }) => w.id === ws.id));
  const one = await call(t, 'GET', `/v1/workspaces/${ws.id}`, { as: owner });
  assert.equal(one.json().members.map((m: { email: string; role: string }) => [m.email, m.role]), [[owner.email, 'owner']]);
});

api('members are invited by email with a role and join when they accept; a member twice is 409', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const colleague = await newCaller(t, 'colleague@acme.test');
  const invited = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: ' Colleague@ACME.test', role: 'developer' } });
  assert.is(invited.statusCode, 201, invited.body);
  const invitation = invited.json();
  assert.match(invitation.id, /^inv_[0-9a-f]{32}$/);
  assert.equal({ ...invitation, id: undefined, createdAt: undefined, expiresAt: undefined }, {
    id: undefined, workspaceId, workspaceName: `Workspace of ${owner.email}`, email: 'colleague@acme.test', role: 'developer', status: 'pending', createdAt: undefined, expiresAt: undefined,
  });
  // Not a member before accepting: nobody is added to a workspace without their consent.
  assert.is((await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: colleague })).statusCode, 403);
  const pending = (await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: owner })).json();
  assert.equal(pending.members.map((m: { email: string }) => m.email), [owner.email]);
  assert.equal(pending.invitations.map((i: { email: string; role: string; status: string }) => [i.email, i.role, i.status]), [['colleague@acme.test', 'developer', 'pending']]);
  assert.equal((await call(t, 'GET', '/v1/invitations', { as: colleague })).json().invitations, [invitation]);

  const accepted = await call(t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: colleague });
  assert.is(accepted.statusCode, 200, accepted.body);
  assert.equal([accepted.json().id, accepted.json().role], [workspaceId, 'developer']);
  assert.equal((await call(t, 'GET', '/v1/invitations', { as: colleague })).json().invitations, []);
  const again = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: colleague.email, role: 'viewer' } });
  assert.is(again.statusCode, 409);
  assert.is(errorCode(again), 'conflict');
  assert.is((await call(t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: colleague })).statusCode, 404, 'an invitation is used once');
  const badRole = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: colleague.email, role: 'superuser' } });
  assert.is(badRole.statusCode, 400);
  assert.match(badRole.json().error.message, /body\.role/);
  const members = await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: colleague });
  assert.equal(members.json().members.map((m: { email: string }) => m.email).sort(), ['colleague@acme.test', owner.email]);
  assert.equal(members.json().invitations, []);
});

api('projects: created, listed, read; names unique per workspace', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Billing', environment: 'production' } });
  assert.is(created.statusCode, 201, created.body);
  const project = created.json();
  assert.match(project.id, /^prj_[a-z2-7]{26}$/);
  assert.equal({ ...project, id: undefined, createdAt: undefined }, { id: undefined, workspaceId, name: 'Billing', environment: 'production', createdAt: undefined });
  const read = await call(t, 'GET', `/v1/projects/${project.id}`, { as: owner });
  assert.equal(read.json(), project);
  const list = await call(t, 'GET', `/v1/workspaces/${workspaceId}/projects`, { as: owner });
  assert.equal(list.json().projects.map((p: { name: string }) => p.name), ['Billing', 'Main']);
  const duplicate = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: ' Billing ', environment: 'development' } });
  assert.is(duplicate.statusCode, 409);
  assert.is(errorCode(duplicate), 'conflict');
  // Another workspace may use the same name.
  const other = await workspaceWithProject(t, owner);
  const elsewhere = await call(t, 'POST', `/v1/workspaces/${other.workspaceId}/projects`, { as: owner, body: { name: 'Billing', environment: 'development' } });
  assert.is(elsewhere.statusCode, 201);
});

api('concurrent creation of the same project yields one 201 and 409s', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const responses = await Promise.all(Array.from({ length: 5 }, () =>
    call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Race', environment: 'development' } })));
  assert.equal(responses.map((r) => r.statusCode).sort(), [201, 409, 409, 409, 409]);
  const list = await call(t, 'GET', `/v1/workspaces/${workspaceId}/projects`, { as: owner });
  assert.is(list.json().projects.filter((p: { name: string }) => p.name === 'Race').length, 1);
});

api('invalid input is 400 validation_error naming the field', async ({ t, owner }) => {
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const cases: Array<[string, string, unknown, RegExp]> = [
    ['POST', '/v1/workspaces', {}, /body\.name/],
    ['POST', '/v1/workspaces', { name: '' }, /body\.name/],
    ['POST', '/v1/workspaces', { name: '   ' }, /body\.name/],
    ['POST', '/v1/workspaces', { name: 'x'.repeat(101) }, /body\.name/],
    ['POST', '/v1/workspaces', { name: 'ok', extra: 1 }, /body\.extra/],
    ['POST', `/v1/workspaces/${workspaceId}/projects`, { name: 'No env' }, /body\.environment/],
    ['POST', `/v1/workspaces/${workspaceId}/projects`, { name: 'Bad env', environment: 'staging' }, /body\.environment/],
    ['POST', `/v1/workspaces/${workspaceId}/projects`, { name: 42, environment: 'development' }, /body\.name/],
    ['POST', `/v1/projects/${projectId}/api-keys`, { name: 'k' }, /body\.permissions/],
    ['POST', `/v1/projects/${projectId}/api-keys`, { name: 'k', permissions: [] }, /body\.permissions/],
    ['POST', `/v1/projects/${projectId}/api-keys`, { name: 'k', permissions: ['email:delete'] }, /body\.permissions/],
    ['POST', `/v1/projects/${projectId}/api-keys`, { name: 'k', permissions: ['email:send', 'email:send'] }, /body\.permissions/],
    ['POST', `/v1/workspaces/${workspaceId}/domains`, { name: 'not a domain' }, /body\.name/],
    ['POST', `/v1/workspaces/${workspaceId}/domains`, { name: 'localhost' }, /body\.name/],
    ['POST', `/v1/workspaces/${workspaceId}/domains`, { name: '192.0.2.1' }, /body\.name/],
    ['POST', `/v1/workspaces/${workspaceId}/suppressions`, { address: 'no-at-sign' }, /body\.address/],
    ['POST', `/v1/workspaces/${workspaceId}/suppressions`, {}, /body\.address/],
    ['GET', `/v1/workspaces/${workspaceId}/suppressions?limit=0`, undefined, /query\.limit/],
    ['GET', `/v1/workspaces/${workspaceId}/suppressions?limit=101`, undefined, /query\.limit/],
    ['GET', '/v1/projects/has%20space', undefined, /path\.id/],
    ['GET', `/v1/projects/${'a'.repeat(65)}`, undefined, /path\.id/],
  ];
  for (const [method, url, body, field] of cases) {
    const response = await call(t, method as 'GET' | 'POST', url, { as: owner, body });
    assert.is(response.statusCode, 400, `${method} ${url} ${JSON.stringify(body)}: ${response.body}`);
    assert.is(errorCode(response), 'validation_error');
    assert.match(response.json().error.message, field, `${method} ${url} ${JSON.stringify(body)}`);
  }
});

api('users: emails unique after normalization; weak passwords refused', async ({ t }) => {
  await createUser(t.ctx.documents, { email: 'Unique@Acme.test', password: PASSWORD }, t.ctx.now());
  await rejects(createUser(t.ctx.documents, { email: ' unique@acme.TEST ', password: PASSWORD }, t.ctx.now()), 'conflict');
  await rejects(createUser(t.ctx.documents, { email: 'short@acme.test', password: 'short' }, t.ctx.now()), 'validation_error');
  await rejects(createUser(t.ctx.documents, { email: 'not-an-email', password: PASSWORD }, t.ctx.now()), 'validation_error');
  const stored = await t.ctx.documents.collection('users').find({ where: { email: 'unique@acme.test' } });
  assert.is(stored.length, 1);
  assert.not.ok(JSON.stringify(stored).includes(PASSWORD));
});

// ---------------------------------------------------------------------------------------
// API keys

api('an API key secret is shown once; only its sha256 is stored', async ({ t, owner }) => {
  const { projectId, workspaceId } = await workspaceWithProject(t, owner);
  const created = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'Backend', permissions: ['email:read', 'email:send'] } });
  assert.is(created.statusCode, 201, created.body);
  assert.is(created.headers['cache-control'], 'no-store');
  const key = created.json();
  assert.match(key.secret, /^rr_test_[A-Za-z0-9_-]{43}$/);
  assert.is(key.preview, key.secret.slice(0, 12));
  assert.equal(key.permissions, ['email:send', 'email:read']);
  assert.is(key.environment, 'development');
  assert.is(key.workspaceId, workspaceId);
  assert.is(key.revokedAt, null);

  const list = await call(t, 'GET', `/v1/projects/${projectId}/api-keys`, { as: owner });
  assert.is(list.json().apiKeys.length, 1);
  assert.not.ok(list.body.includes(key.secret));
  assert.is(list.json().apiKeys[0].secret, undefined);

  const stored = await t.ctx.documents.collection<{ _id: string; secretHash: string }>('api_keys').get(key.id);
  assert.ok(stored);
  assert.is(stored.secretHash, sha256Hex(key.secret));
  assert.not.ok(JSON.stringify(stored).includes(key.secret.slice(12)));

  const principal = await authenticateApiKey(t.ctx, `Bearer ${key.secret}`);
  assert.equal(principal, {
    keyId: key.id, projectId, workspaceId, environment: 'development', permissions: ['email:send', 'email:read'], workspaceActivated: false, allowances: DEFAULT_ALLOWANCES,
  });
});

api('bearer authentication refuses anything but a live key with invalid_api_key', async ({ t, owner }) => {
  const { projectId } = await workspaceWithProject(t, owner);
  const { secret, id } = (await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'k', permissions: ['email:send'] } })).json();
  assert.ok(await authenticateApiKey(t.ctx, `bearer ${secret}`), 'the scheme is case-insensitive');
  const forged = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
  for (const header of [undefined, '', 'Basic dXNlcjpwYXNz', secret, `Bearer`, `Bearer ${forged}`, `Bearer ${secret.replace('rr_test_', 'rr_live_')}`,
    `Bearer ${secret.replace('rr_test_', 'sk_test_')}`, `Bearer ${secret} extra`]) {
    await rejects(authenticateApiKey(t.ctx, header), 'invalid_api_key');
  }
  const revoked = await call(t, 'DELETE', `/v1/api-keys/${id}`, { as: owner });
  assert.is(revoked.statusCode, 200);
  assert.ok(revoked.json().revokedAt);
  await rejects(authenticateApiKey(t.ctx, `Bearer ${secret}`), 'invalid_api_key');
  const again = await call(t, 'DELETE', `/v1/api-keys/${id}`, { as: owner });
  assert.is(again.statusCode, 200);
  assert.is(again.json().revokedAt, revoked.json().revokedAt, 'revoking twice keeps the first time');
  assert.is((await call(t, 'DELETE', '/v1/api-keys/key_unknown', { as: owner })).statusCode, 404);
});

api('permissions are checked by requirePermission', async ({ t, owner }) => {
  const { projectId } = await workspaceWithProject(t, owner);
  const { secret } = (await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'reader', permissions: ['email:read'] } })).json();
  const principal = await authenticateApiKey(t.ctx, `Bearer ${secret}`);
  requirePermission(principal, 'email:read');
  try {
    requirePermission(principal, 'email:send');
    assert.unreachable('email:send should be refused');
  } catch (error) {
    assert.instance(error, RelayError);
    assert.is((error as RelayError).code, 'forbidden');
  }
});

api('production keys need an activated workspace: production_not_enabled until then', async ({ t, owner }) => {
  const { workspaceId, projectId } = await workspaceWithProject(t, owner, 'production');
  const created = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'live', permissions: ['email:send'] } });
  const { secret } = created.json();
  assert.match(secret, /^rr_live_/);
  assert.is(created.json().environment, 'production');
  await rejects(authenticateApiKey(t.ctx, `Bearer ${secret}`), 'production_not_enabled');
  await setWorkspaceActivation(t.ctx.documents, workspaceId, true, t.ctx.now());
  const principal = await authenticateApiKey(t.ctx, `Bearer ${secret}`);
  assert.is(principal.environment, 'production');
  assert.is(principal.workspaceActivated, true);
  const ws = await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: owner });
  assert.is(ws.json().activated, true);
  assert.ok(ws.json().activatedAt);
  await setWorkspaceActivation(t.ctx.documents, workspaceId, false, t.ctx.now());
  await rejects(authenticateApiKey(t.ctx, `Bearer ${secret}`), 'production_not_enabled');

  // A development key of an inactive workspace works, and says the workspace is inactive.
  const dev = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Dev', environment: 'development' } });
  const devKey = (await call(t, 'POST', `/v1/projects/${dev.json().id}/api-keys`, { as: owner, body: { name: 'dev', permissions: ['email:send'] } })).json();
  const devPrincipal = await authenticateApiKey(t.ctx, `Bearer ${devKey.secret}`);
  assert.is(devPrincipal.workspaceActivated, false);
  assert.is(devPrincipal.environment, 'development');
});

api('a revoked key is refused at once by the process that revoked it, and within REUSE_MS when revoked elsewhere', async ({ t, owner }) => {
  const { projectId } = await workspaceWithProject(t, owner);
  const newKey = async () => (await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'reader', permissions: ['email:read'] } })).json();
  const list = async (secret: string) => t.app.inject({ method: 'GET', url: '/v1/emails', headers: { authorization: `Bearer ${secret}` } });

  // Revoked through this process's API: the very next request is refused.
  const here = await newKey();
  for (let i = 0; i < 3; i++) assert.is((await list(here.secret)).statusCode, 200, 'a live key, read again or remembered');
  assert.is((await call(t, 'DELETE', `/v1/api-keys/${here.id}`, { as: owner })).statusCode, 200);
  const refused = await list(here.secret);
  assert.is(refused.statusCode, 401);
  assert.is(refused.json().error.code, 'invalid_api_key');

  // Revoked by another process (its write reaches this one only through the store): refused
  // once the bound has passed since the key was last read.
  const elsewhere = await newKey();
  assert.is((await list(elsewhere.secret)).statusCode, 200);
  const keys = t.stores.documents.collection<ApiKey>('api_keys');
  const stored = (await keys.get(elsewhere.id))!;
  const { _v, ...doc } = stored;
  assert.ok(await keys.replace({ ...doc, revokedAt: new Date().toISOString() }, _v));
  await new Promise((resolve) => setTimeout(resolve, REUSE_MS + 20));
  const late = await list(elsewhere.secret);
  assert.is(late.statusCode, 401);
  assert.is(late.json().error.code, 'invalid_api_key');
});

api('a send sees its domain disconnected through this process at once, and changed by another process within REUSE_MS', async ({ t, owner, dns }) => {
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const domain = (await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'reused.test' } })).json() as DomainView;
  dns.setZone(zoneFor(domain));
  assert.is((await call(t, 'POST', `/v1/domains/${domain.id}/verify`, { as: owner })).json().status, 'verified');
  const connect = () => call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner });
  assert.is((await connect()).statusCode, 200);
  const { secret } = (await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'sender', permissions: ['email:send'] } })).json();
  const send = async () => {
    const response = await t.app.inject({
      method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${secret}` },
      payload: { from: 'hello@reused.test', to: 'you@reused.test', subject: 'reuse', text: 'hi' },
    });
    return response.statusCode === 202 ? 'accepted' : response.json().error.code;
  };
  assert.is(await send(), 'accepted');
  assert.is(await send(), 'accepted', 'the domain read again or reused');

  // Through this process's API: the very next send sees it.
  assert.is((await call(t, 'DELETE', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner })).statusCode, 200);
  assert.is(await send(), 'sender_not_allowed');
  assert.is((await connect()).statusCode, 200);
  assert.is(await send(), 'accepted');

  // Written by another process (it reaches this one only through the store): seen once the
  // bound has passed since the domain was last read.
  const domains = t.stores.documents.collection<SendingDomain>('domains');
  const { _v, ...stored } = (await domains.get(domain.id))!;
  assert.ok(await domains.replace({ ...stored, status: 'failed' }, _v));
  await new Promise((resolve) => setTimeout(resolve, REUSE_MS + 20));
  assert.is(await send(), 'domain_not_verified');
});

// ---------------------------------------------------------------------------------------
// Suppressions

api('suppressions: added normalized, listed in pages, removed; duplicates 409', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const base = `/v1/workspaces/${workspaceId}/suppressions`;
  const added = await call(t, 'POST', base, { as: owner, body: { address: '  Bob@Example.TEST ' } });
  assert.is(added.statusCode, 201, added.body);
  assert.equal({ ...added.json(), createdAt: undefined }, { address: 'bob@example.test', reason: 'manual', emailId: null, createdAt: undefined });
  const duplicate = await call(t, 'POST', base, { as: owner, body: { address: 'BOB@example.test' } });
  assert.is(duplicate.statusCode, 409);
  assert.is(errorCode(duplicate), 'conflict');
  // Stored under the id admission looks up.
  assert.ok(await t.ctx.documents.collection('suppressions').get(`${workspaceId}:bob@example.test`));

  for (const a of ['e@x.test', 'c@x.test', 'a@x.test', 'd@x.test']) assert.is((await call(t, 'POST', base, { as: owner, body: { address: a } })).statusCode, 201);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const url: string = `${base}?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await call(t, 'GET', url, { as: owner });
    assert.is(page.statusCode, 200, page.body);
    seen.push(...page.json().suppressions.map((s: { address: string }) => s.address));
    cursor = page.json().next_cursor;
    pages++;
  } while (cursor && pages < 10);
  assert.equal(seen, ['a@x.test', 'bob@example.test', 'c@x.test', 'd@x.test', 'e@x.test']);
  assert.is(pages, 3);

  const removed = await call(t, 'DELETE', `${base}/${encodeURIComponent(' BOB@Example.test')}`, { as: owner });
  assert.is(removed.statusCode, 200, removed.body);
  assert.equal(removed.json(), { deleted: true, address: 'bob@example.test' });
  const gone = await call(t, 'DELETE', `${base}/bob@example.test`, { as: owner });
  assert.is(gone.statusCode, 404);
  assert.is(errorCode(gone), 'not_found');
  const list = await call(t, 'GET', base, { as: owner });
  assert.not.ok(list.json().suppressions.some((s: { address: string }) => s.address === 'bob@example.test'));

  // Workspace-wide and per workspace: another workspace's list is its own.
  const other = await workspaceWithProject(t, owner);
  assert.equal((await call(t, 'GET', `/v1/workspaces/${other.workspaceId}/suppressions`, { as: owner })).json().suppressions, []);
});

// ---------------------------------------------------------------------------------------
// Domains

interface DomainView {
  id: string;
  name: string;
  status: string;
  records: Array<{ name: string; type: 'TXT' | 'MX'; value: string; priority?: number; purpose: string; required: boolean; txtStrings?: string[] }>;
  checks: Array<{ purpose: string; name: string; status: string; required: boolean; message: string; found: string[] }> | null;
  lastCheckedAt: string | null;
  verifiedBy: string | null;
  projectIds: string[];
}

/** What a customer who followed the instructions publishes, optionally without some purposes. */
function zoneFor(domain: DomainView, options: { skip?: string[]; dkimValue?: string } = {}): ZoneRecord[] {
  return domain.records.filter((r) => !options.skip?.includes(r.purpose)).map((r): ZoneRecord =>
    r.type === 'MX'
      ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
      : { name: r.name, type: 'TXT', data: r.purpose === 'dkim' && options.dkimValue ? options.dkimValue : (r.txtStrings ?? r.value) });
}

const checkOf = (domain: DomainView, purpose: string) => {
  const check = domain.checks?.find((c) => c.purpose === purpose);
  if (!check) throw new Error(`no ${purpose} check in ${JSON.stringify(domain.checks)}`);
  return check;
};

api('creating a domain normalizes the name and lists the records to publish, never the private key', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: ' Mail.Acme-Corp.TEST. ' } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView & { dkimSelector: string; mailFromDomain: string };
  assert.is(domain.name, 'mail.acme-corp.test');
  assert.is(domain.status, 'pending');
  assert.is(domain.checks, null);
  assert.is(domain.mailFromDomain, 'bounce.mail.acme-corp.test');
  assert.match(domain.dkimSelector, /^rr\d{8}[a-z2-7]{6}$/);
  const byPurpose = Object.fromEntries(domain.records.map((r) => [r.purpose, r]));
  assert.equal(Object.keys(byPurpose).sort(), ['dkim', 'dmarc', 'mail_from_mx', 'mail_from_spf']);
  assert.is(byPurpose.dkim.name, `${domain.dkimSelector}._domainkey.mail.acme-corp.test`);
  assert.match(byPurpose.dkim.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}$/);
  assert.is(byPurpose.dkim.txtStrings!.join(''), byPurpose.dkim.value);
  assert.ok(byPurpose.dkim.txtStrings!.every((s) => s.length <= 255));
  assert.equal({ name: byPurpose.mail_from_mx.name, value: byPurpose.mail_from_mx.value, priority: byPurpose.mail_from_mx.priority },
    { name: 'bounce.mail.acme-corp.test', value: MAIL_HOST, priority: 10 });
  assert.is(byPurpose.mail_from_spf.value, `v=spf1 a:${MAIL_HOST} ~all`);
  assert.is(byPurpose.dmarc.required, false);
  assert.ok(byPurpose.dkim.required && byPurpose.mail_from_mx.required && byPurpose.mail_from_spf.required);
  assert.not.match(created.body, /PRIVATE KEY/);

  // The private key is kept sealed with Relay's secret: nothing in the stored document is the key.
  const stored = await t.ctx.documents.collection<{ _id: string; dkimPrivateKeySealed: string }>('domains').get(domain.id);
  assert.not.match(JSON.stringify(stored), /PRIVATE KEY/);
  assert.match(t.ctx.services.secrets.open(stored!.dkimPrivateKeySealed, 'dkim-private-key'), /^-----BEGIN PRIVATE KEY-----/);
  const read = await call(t, 'GET', `/v1/domains/${domain.id}`, { as: owner });
  assert.equal(read.json(), created.json());
  assert.not.match(read.body, /PRIVATE KEY/);
  const list = await call(t, 'GET', `/v1/workspaces/${workspaceId}/domains`, { as: owner });
  assert.equal(list.json().domains.map((d: DomainView) => d.id), [domain.id]);

  const duplicate = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'MAIL.acme-corp.test' } });
  assert.is(duplicate.statusCode, 409);
  assert.is(errorCode(duplicate), 'conflict');

  const idn = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'Bücher.example' } });
  assert.is(idn.statusCode, 201, idn.body);
  assert.is(idn.json().name, 'xn--bcher-kva.example');
});

api('domain verification asks the real DNS server and names what is missing or wrong', async ({ t, owner, dns }) => {
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const domain = (await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'verify.test' } })).json() as DomainView;
  const verify = async () => {
    const response = await call(t, 'POST', `/v1/domains/${domain.id}/verify`, { as: owner });
    assert.is(response.statusCode, 200, response.body);
    return response.json() as DomainView;
  };
  const before = dns.queries.length;

  // Nothing published.
  dns.setZone([]);
  let checked = await verify();
  assert.ok(dns.queries.length > before, 'the DNS server was asked');
  assert.is(checked.status, 'pending');
  assert.ok(checked.lastCheckedAt);
  for (const purpose of ['dkim', 'mail_from_mx', 'mail_from_spf']) assert.is(checkOf(checked, purpose).status, 'missing', purpose);

  // Connecting an unverified domain is refused.
  const early = await call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner });
  assert.is(early.statusCode, 422);
  assert.is(errorCode(early), 'domain_not_verified');

  // Everything but the MX, and a DKIM record holding some other key.
  dns.setZone(zoneFor(domain, { skip: ['mail_from_mx'], dkimValue: 'v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQC1' }));
  checked = await verify();
  assert.is(checked.status, 'failed');
  assert.is(checkOf(checked, 'dkim').status, 'mismatch');
  assert.match(checkOf(checked, 'dkim').message, /does not hold the expected public key/);
  assert.equal(checkOf(checked, 'dkim').found, ['v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQC1']);
  assert.is(checkOf(checked, 'mail_from_mx').status, 'missing');
  assert.match(checkOf(checked, 'mail_from_mx').message, /bounce\.verify\.test/);
  assert.is(checkOf(checked, 'mail_from_spf').status, 'ok');

  // All required records right, no DMARC: verified, DMARC reported as a recommendation.
  dns.setZone(zoneFor(domain, { skip: ['dmarc'] }));
  checked = await verify();
  assert.is(checked.status, 'verified');
  assert.is(checked.verifiedBy, 'dns');
  assert.is(checkOf(checked, 'dmarc').status, 'missing');
  assert.is(checkOf(checked, 'dmarc').required, false);
  for (const purpose of ['dkim', 'mail_from_mx', 'mail_from_spf']) assert.is(checkOf(checked, purpose).status, 'ok', purpose);

  // The outcome is stored: a plain read shows it.
  const read = (await call(t, 'GET', `/v1/domains/${domain.id}`, { as: owner })).json() as DomainView;
  assert.is(read.status, 'verified');
  assert.equal(read.checks, checked.checks);

  // Verified: it connects (twice is harmless) and disconnects.
  const connected = await call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner });
  assert.is(connected.statusCode, 200, connected.body);
  assert.equal(connected.json().projectIds, [projectId]);
  assert.equal((await call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner })).json().projectIds, [projectId]);
  const disconnected = await call(t, 'DELETE', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner });
  assert.is(disconnected.statusCode, 200);
  assert.equal(disconnected.json().projectIds, []);

  // A verified domain whose records disappear fails at the next check.
  dns.setZone([]);
  checked = await verify();
  assert.is(checked.status, 'failed');
  assert.is(checked.verifiedBy, null);
});

api('a domain connects only to projects of its own workspace', async ({ t, owner, dns }) => {
  const mine = await workspaceWithProject(t, owner);
  const other = await workspaceWithProject(t, owner);
  const domain = (await call(t, 'POST', `/v1/workspaces/${mine.workspaceId}/domains`, { as: owner, body: { name: 'scoped.test' } })).json() as DomainView;
  dns.setZone(zoneFor(domain));
  assert.is((await call(t, 'POST', `/v1/domains/${domain.id}/verify`, { as: owner })).json().status, 'verified');
  const across = await call(t, 'POST', `/v1/domains/${domain.id}/projects/${other.projectId}`, { as: owner });
  assert.is(across.statusCode, 404);
  assert.is(errorCode(across), 'not_found');
  const unknown = await call(t, 'POST', `/v1/domains/${domain.id}/projects/prj_missing`, { as: owner });
  assert.is(unknown.statusCode, 404);
  const home = await call(t, 'POST', `/v1/domains/${domain.id}/projects/${mine.projectId}`, { as: owner });
  assert.equal(home.json().projectIds, [mine.projectId]);
  // The same name in another workspace is a separate domain with its own key.
  const twin = await call(t, 'POST', `/v1/workspaces/${other.workspaceId}/domains`, { as: owner, body: { name: 'scoped.test' } });
  assert.is(twin.statusCode, 201);
  assert.is.not(twin.json().id, domain.id);
  assert.is.not(twin.json().records[0].value, domain.records[0].value);
});

api('a member added later sees the workspace through the session endpoint', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const late = await newCaller(t, 'late@acme.test');
  assert.equal((await call(t, 'GET', '/v1/session', { as: late })).json().memberships, []);
  await addMember(t, owner, workspaceId, late, 'viewer');
  const me = (await call(t, 'GET', '/v1/session', { as: late })).json();
  assert.equal(me.memberships.map((m: { workspaceId: string; role: string }) => [m.workspaceId, m.role]), [[workspaceId, 'viewer']]);
});

api.run();
