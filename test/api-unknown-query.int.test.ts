// Every JSON API route refuses a query parameter it does not take (apps/api/INTERFACE-DECISIONS.md,
// 400 validation_error: "an unknown query parameter … the message names it"), so that a client's
// typo such as ?limt=5 is an error instead of a silent default; the known parameters keep
// working. Pages, probes and /metrics keep ignoring parameters (LENIENT says why). Requests go
// over real HTTP to the listening app; the routes are read from the running app (printRoutes),
// so a route added later fails here until it has a row in ROUTES (where the refusal is then
// checked) or in LENIENT.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ASSET_PATHS, PAGE_PATHS } from '../apps/dashboard/dashboard.ts';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { waitUntil } from './support/eventually.ts';
import { call, newCaller, signIn, workspaceWithProject, type Caller } from './support/management.ts';
import { servedRoutes } from './support/served-routes.ts';

/** The unknown parameter every route is sent: a typo of `limit`, which some routes take. */
const UNKNOWN = 'limt';

interface Fixture {
  t: TestApp;
  owner: Caller;
  member: Caller;
  workspaceId: string;
  projectId: string;
  domainId: string;
  apiKey: string;
  apiKeyId: string;
  /** obsolete: the one the DELETE of the known-parameter test removes. */
  templateIds: Record<'welcome' | 'farewell' | 'obsolete', string>;
  /** Newest first, as the lists answer. */
  emailIds: [string, string];
  invitationId: string;
  endpointId: string;
}

interface Answer { status: number; headers: Headers; text: string; json(): any }

interface Row {
  /** 'fresh session': a session of the owner's own, for a route that could end it. */
  auth: 'none' | 'bearer' | 'session' | 'fresh session';
  /** Path parameters other than workspaceId, projectId, emailId, userId (those come from the fixture). */
  params?: (f: Fixture) => Record<string, string>;
  /** A body the route's schema accepts: the body is checked before the query. */
  body?: (f: Fixture) => unknown;
  /** A valid query of the parameters the route takes; sent alone, the route must succeed (expect) and they must work (check). */
  query?: (f: Fixture) => Record<string, string>;
  expect?: number;
  check?: (f: Fixture, answer: Answer, send: (query: Record<string, string>) => Promise<Answer>) => void | Promise<void>;
}

/** The `:id` of a route: which of the fixture's records it names. */
const id = (of: (f: Fixture) => string) => (f: Fixture) => ({ id: of(f) });
const byProject = (f: Fixture) => ({ projectId: f.projectId });
const FROM_TO = { from: '2025-01-01T00:00:00Z', to: '2025-01-08T00:00:00Z' };

/** Two emails, newest first: `limit=1` answers the first with a cursor that leads to the second. */
async function pagesInOrder(f: Fixture, first: Answer, send: (query: Record<string, string>) => Promise<Answer>) {
  assert.equal(first.json().emails.map((e: { id: string }) => e.id), [f.emailIds[0]]);
  const cursor = first.json().next_cursor;
  assert.type(cursor, 'string');
  const second = await send({ limit: '1', cursor });
  assert.is(second.status, 200, second.text);
  assert.equal(second.json().emails.map((e: { id: string }) => e.id), [f.emailIds[1]]);
}

const templateBody = (slug: string) => ({ name: slug, slug, subject: 'Hi {{name}}', html: '<p>{{name}}</p>', text: 'Hi {{name}}' });

/** Every route that answers JSON API requests, with what a valid request of it needs. */
const ROUTES: Record<string, Row> = {
  'POST /v1/emails': { auth: 'bearer', body: () => ({ from: 'app@uq.test', to: 'a@uq.test', subject: 'Hi', text: 'Hi' }) },
  'GET /v1/emails': { auth: 'bearer', query: () => ({ limit: '1' }), check: pagesInOrder },
  'GET /v1/emails/:id': { auth: 'bearer', params: id((f) => f.emailIds[0]) },
  'GET /v1/projects/:projectId/emails': { auth: 'session', query: () => ({ limit: '1' }), check: pagesInOrder },
  'GET /v1/projects/:projectId/emails/:emailId': { auth: 'session' },
  'GET /v1/projects/:projectId/emails/:emailId/message': { auth: 'session' },
  'GET /v1/projects/:projectId/emails/:emailId/message.html': {
    auth: 'session', query: () => ({ remote_images: 'on' }),
    check: async (_f, on, send) => {
      assert.match(on.headers.get('content-security-policy') ?? '', /img-src data: https: http:;/);
      const off = await send({ remote_images: 'off' });
      assert.match(off.headers.get('content-security-policy') ?? '', /img-src data:;/);
    },
  },
  'POST /v1/session': { auth: 'none', body: (f) => ({ email: f.owner.email, password: 'not the password' }) },
  'GET /v1/session': { auth: 'session' },
  'DELETE /v1/session': { auth: 'fresh session' },
  'POST /v1/workspaces': { auth: 'session', body: () => ({ name: 'Another' }) },
  'GET /v1/workspaces': { auth: 'session' },
  'GET /v1/workspaces/:id': { auth: 'session', params: id((f) => f.workspaceId) },
  'POST /v1/workspaces/:id/members': { auth: 'session', params: id((f) => f.workspaceId), body: () => ({ email: 'someone@uq.test', role: 'viewer' }) },
  'PATCH /v1/workspaces/:id/members/:userId': { auth: 'session', params: id((f) => f.workspaceId), body: () => ({ role: 'admin' }) },
  'DELETE /v1/workspaces/:id/members/:userId': { auth: 'session', params: id((f) => f.workspaceId) },
  'GET /v1/workspaces/:workspaceId/usage': { auth: 'session' },
  'GET /v1/invitations': { auth: 'session' },
  'POST /v1/invitations/:id/accept': { auth: 'session', params: id((f) => f.invitationId) },
  'DELETE /v1/invitations/:id': { auth: 'session', params: id((f) => f.invitationId) },
  'POST /v1/workspaces/:workspaceId/projects': { auth: 'session', body: () => ({ name: 'Another', environment: 'development' }) },
  'GET /v1/workspaces/:workspaceId/projects': { auth: 'session' },
  'GET /v1/projects/:id': { auth: 'session', params: id((f) => f.projectId) },
  'POST /v1/workspaces/:workspaceId/domains': { auth: 'session', body: () => ({ name: 'second.uq.test' }) },
  'GET /v1/workspaces/:workspaceId/domains': { auth: 'session' },
  'GET /v1/domains/:id': { auth: 'session', params: id((f) => f.domainId) },
  'POST /v1/domains/:id/verify': { auth: 'session', params: id((f) => f.domainId) },
  'POST /v1/domains/:id/dkim-rotation': { auth: 'session', params: id((f) => f.domainId) },
  'DELETE /v1/domains/:id/dkim-rotation': { auth: 'session', params: id((f) => f.domainId) },
  'POST /v1/domains/:id/projects/:projectId': { auth: 'session', params: id((f) => f.domainId) },
  'DELETE /v1/domains/:id/projects/:projectId': { auth: 'session', params: id((f) => f.domainId) },
  'POST /v1/projects/:projectId/api-keys': { auth: 'session', body: () => ({ name: 'ci', permissions: ['email:read'] }) },
  'GET /v1/projects/:projectId/api-keys': {
    // The fixture's key is listed live or, once the DELETE row revoked it, as the one revoked key a page of 1 shows.
    auth: 'session', query: () => ({ limit: '1' }),
    check: (f, answer) => assert.ok(answer.json().apiKeys.some((k: { id: string }) => k.id === f.apiKeyId), answer.text),
  },
  'DELETE /v1/api-keys/:id': { auth: 'session', params: id((f) => f.apiKeyId) },
  'GET /v1/projects/:projectId/stats': {
    auth: 'session', query: () => ({ ...FROM_TO, granularity: 'day', groupBy: 'recipient_domain' }),
    check: (_f, answer) => {
      const { from, to, granularity, group_by } = answer.json();
      assert.equal({ from, to, granularity, group_by }, { from: '2025-01-01T00:00:00.000Z', to: '2025-01-08T00:00:00.000Z', granularity: 'day', group_by: 'recipient_domain' });
    },
  },
  'GET /v1/projects/:projectId/stats/chart.svg': {
    auth: 'session', query: () => ({ ...FROM_TO, granularity: 'day' }),
    check: (_f, answer) => {
      assert.match(answer.headers.get('content-type') ?? '', /^image\/svg\+xml/);
      assert.match(answer.text, /^<svg/);
    },
  },
  // Every template route takes projectId (spec: Template endpoints); the list also limit and cursor.
  'GET /v1/templates': {
    auth: 'session', query: (f) => ({ ...byProject(f), limit: '1' }),
    check: async (f, first, send) => {
      const [one] = first.json().templates;
      assert.is(first.json().templates.length, 1);
      const second = await send({ ...byProject(f), limit: '1', cursor: first.json().next_cursor });
      assert.is(second.status, 200, second.text);
      assert.is(second.json().templates.length, 1);
      assert.is.not(second.json().templates[0].id, one.id);
    },
  },
  'POST /v1/templates': { auth: 'session', query: byProject, body: () => templateBody('receipt'), expect: 201 },
  'POST /v1/templates/preview': {
    auth: 'session', query: byProject, body: () => ({ subject: 'Hi {{name}}', text: 'Hi {{name}}', variables: { name: 'Ada' } }),
    check: (_f, answer) => assert.is(answer.json().subject, 'Hi Ada'),
  },
  'GET /v1/templates/:id': { auth: 'session', params: id((f) => f.templateIds.welcome), query: byProject, check: (f, answer) => assert.is(answer.json().id, f.templateIds.welcome) },
  'PATCH /v1/templates/:id': {
    auth: 'session', params: id((f) => f.templateIds.welcome), query: byProject, body: () => ({ ...templateBody('welcome'), subject: 'Welcome {{name}}', revision: 1 }),
    check: (_f, answer) => assert.is(answer.json().subject, 'Welcome {{name}}'),
  },
  'POST /v1/templates/:id/test': {
    auth: 'session', params: id((f) => f.templateIds.welcome), query: byProject, body: () => ({ from: 'app@uq.test', to: 'qa@uq.test', variables: { name: 'Ada' } }), expect: 202,
  },
  'DELETE /v1/templates/:id': { auth: 'session', params: id((f) => f.templateIds.obsolete), query: byProject },

  'POST /v1/projects/:projectId/webhook-endpoints': { auth: 'session', body: () => ({ url: 'https://localhost/relay', events: ['email.sent'] }) },
  'GET /v1/projects/:projectId/webhook-endpoints': { auth: 'session' },
  'GET /v1/webhook-endpoints/:id': { auth: 'session', params: id((f) => f.endpointId) },
  'GET /v1/webhook-endpoints/:id/deliveries': { auth: 'session', params: id((f) => f.endpointId), query: () => ({ limit: '10' }) },
  'PATCH /v1/webhook-endpoints/:id': { auth: 'session', params: id((f) => f.endpointId), body: () => ({ enabled: true }) },
  'POST /v1/webhook-endpoints/:id/rotate-secret': { auth: 'session', params: id((f) => f.endpointId) },
  'DELETE /v1/webhook-endpoints/:id': { auth: 'session', params: id((f) => f.endpointId) },
  'GET /v1/workspaces/:workspaceId/suppressions': { auth: 'session', query: () => ({ limit: '10', prefix: 'gone' }) },
  'GET /v1/workspaces/:workspaceId/suppressions/export': { auth: 'session' },
  'POST /v1/workspaces/:workspaceId/suppressions': { auth: 'session', body: () => ({ address: 'gone@uq.test' }) },
  'DELETE /v1/workspaces/:workspaceId/suppressions/:address': { auth: 'session', params: () => ({ address: 'gone@uq.test' }) },
  'GET /v1/projects/:projectId/outbox': { auth: 'session', query: () => ({ limit: '10' }) },
  'GET /v1/projects/:projectId/outbox/:emailId': { auth: 'session' },
};

/** Routes that deliberately ignore parameters they do not take, and why; each is checked to keep answering with one. */
const LENIENT: Record<string, string> = {
  'GET /healthz': 'a probe: load balancers and orchestrators may add parameters of their own',
  'GET /readyz': 'a probe: load balancers and orchestrators may add parameters of their own',
  'GET /metrics': 'scraped by Prometheus, whose scrape configs may add params',
  'GET /v1/openapi.json': 'a static document for browsers and generators, fetched with cache busters like any file',
  'GET /v1/asyncapi.json': 'a static document for browsers and generators, fetched with cache busters like any file',
  ...Object.fromEntries(PAGE_PATHS.map((path) => [`GET ${path}`, 'a dashboard page: links into it carry UTM tags, the sign-in page next='])),
  ...Object.fromEntries(ASSET_PATHS.map((path) => [`GET ${path}`, 'a dashboard file: browsers and proxies may add cache busters'])),
};

/** "GET /v1/emails/:id" → "GET /v1/emails/:" (printRoutes does not keep parameter names). */
const shapeOf = (route: string) => route.replace(/:\w+/g, ':');

function pathOf(f: Fixture, route: string, row: Pick<Row, 'params'>): string {
  const params: Record<string, string> = {
    workspaceId: f.workspaceId, projectId: f.projectId, emailId: f.emailIds[0], userId: f.member.userId, ...row.params?.(f),
  };
  return route.slice(route.indexOf(' ') + 1).replace(/:(\w+)/g, (_, name: string) => {
    assert.ok(name in params, `${route}: no value for :${name}`);
    return encodeURIComponent(params[name]);
  });
}

async function send(f: Fixture, route: string, row: Row, query: Record<string, string>): Promise<Answer> {
  const method = route.slice(0, route.indexOf(' '));
  const headers: Record<string, string> = {};
  if (row.auth === 'bearer') headers.authorization = `Bearer ${f.apiKey}`;
  if (row.auth === 'session') headers.cookie = f.owner.cookie;
  if (row.auth === 'fresh session') headers.cookie = await signIn(f.t, f.owner.email);
  // What the dashboard sends: browsers add the Origin to every write.
  if (method !== 'GET') headers.origin = f.t.config.dashboardOrigin;
  const body = row.body?.(f);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const search = new URLSearchParams(query).toString();
  const response = await fetch(`${f.t.url}${pathOf(f, route, row)}${search ? `?${search}` : ''}`, {
    method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

/** What the refused writes could have changed, as the owner reads it. */
async function stateOf(f: Fixture): Promise<unknown> {
  const read = async (url: string, headers: Record<string, string> = { cookie: f.owner.cookie }): Promise<any> => {
    const response = await fetch(`${f.t.url}${url}`, { headers });
    assert.is(response.status, 200, url);
    return response.json();
  };
  // The session's expiry slides with every use.
  const { user, memberships } = await read('/v1/session');
  return {
    session: { user, memberships },
    workspaces: await read('/v1/workspaces'),
    workspace: await read(`/v1/workspaces/${f.workspaceId}`),
    projects: await read(`/v1/workspaces/${f.workspaceId}/projects`),
    domains: await read(`/v1/workspaces/${f.workspaceId}/domains`),
    keys: await read(`/v1/projects/${f.projectId}/api-keys`),
    templates: await read(`/v1/templates?projectId=${f.projectId}`),
    emails: await read('/v1/emails', { authorization: `Bearer ${f.apiKey}` }),
    invitations: await read('/v1/invitations', { cookie: f.member.cookie }),
  };
}

const test = suite<Fixture>('unknown query parameters on every route');

test.before(async (f) => {
  f.t = await startTestApp({ RELAY_WEBHOOK_ALLOW: 'localhost:443' }, { listen: true, processors: ['projector'] });
  const t = f.t;
  const must = async (response: ReturnType<typeof call>, status: number) => {
    const r = await response;
    if (r.statusCode !== status) throw new Error(`fixture: ${r.statusCode} ${r.body}`);
    return r.json();
  };
  f.owner = await newCaller(t, 'owner@uq.test');
  f.member = await newCaller(t, 'member@uq.test');
  ({ workspaceId: f.workspaceId, projectId: f.projectId } = await workspaceWithProject(t, f.owner));
  f.domainId = (await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/domains`, { as: f.owner, body: { name: 'uq.test' } }), 201)).id;
  await markDomainVerified(t.ctx.documents, f.domainId, 'fixture', t.ctx.now());
  await must(call(t, 'POST', `/v1/domains/${f.domainId}/projects/${f.projectId}`, { as: f.owner }), 200);
  const key = await must(call(t, 'POST', `/v1/projects/${f.projectId}/api-keys`, { as: f.owner, body: { name: 'main', permissions: ['email:send', 'email:read'] } }), 201);
  f.apiKey = key.secret;
  f.apiKeyId = key.id;
  const template = async (slug: string) => (await must(call(t, 'POST', `/v1/templates?projectId=${f.projectId}`, { as: f.owner, body: templateBody(slug) }), 201)).id as string;
  f.templateIds = { welcome: await template('welcome'), farewell: await template('farewell'), obsolete: await template('obsolete') };
  f.invitationId = (await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/members`, { as: f.owner, body: { email: f.member.email, role: 'viewer' } }), 201)).id;
  f.endpointId = (await must(call(t, 'POST', `/v1/projects/${f.projectId}/webhook-endpoints`, { as: f.owner, body: { url: 'https://localhost/relay', events: ['email.sent'] } }), 201)).id;
  const bearer = { authorization: `Bearer ${f.apiKey}` };
  for (const to of ['a@uq.test', 'b@uq.test']) {
    await must(call(t, 'POST', '/v1/emails', { headers: bearer, body: { from: 'app@uq.test', to, subject: 'Hi', text: 'Hi', html: '<p>Hi</p>' } }), 202);
  }
  await waitUntil(async () => (await call(t, 'GET', '/v1/emails', { headers: bearer })).json().emails?.length === 2, 'both emails are listed');
  f.emailIds = (await call(t, 'GET', '/v1/emails', { headers: bearer })).json().emails.map((e: { id: string }) => e.id);
});

test.after(async (f) => {
  await f.t.close();
});

test('every route the app serves is in ROUTES or LENIENT', (f) => {
  const served = new Set([...servedRoutes(f.t)].filter((route) => !route.startsWith('HEAD ')));
  const listed = new Map([...Object.keys(ROUTES), ...Object.keys(LENIENT)].map((route) => [shapeOf(route), route]));
  const missing = [...served].filter((route) => !listed.has(route));
  const stale = [...listed.keys()].filter((route) => !served.has(route));
  assert.equal(missing, [], `routes in neither ROUTES (refusing unknown query parameters) nor LENIENT: ${missing.join(', ')}`);
  assert.equal(stale, [], `rows for routes the app does not serve: ${stale.join(', ')}`);
  assert.equal(Object.keys(ROUTES).filter((route) => route in LENIENT), []);
});

test(`every JSON API route answers ?${UNKNOWN}=5 with 400 validation_error naming query.${UNKNOWN}, the same message everywhere, and changes nothing`, async (f) => {
  const before = await stateOf(f);
  const failures: string[] = [];
  const messages = new Map<string, string>();
  for (const [route, row] of Object.entries(ROUTES)) {
    // With the route's own parameters too: the unknown one is refused next to valid ones.
    const answer = await send(f, route, row, { ...row.query?.(f), [UNKNOWN]: '5' });
    let error: { code?: unknown; message?: unknown } | undefined;
    try {
      error = answer.json().error;
    } catch {}
    if (answer.status !== 400 || error?.code !== 'validation_error' || typeof error.message !== 'string' || !error.message.startsWith(`query.${UNKNOWN}: `)) {
      failures.push(`${route}: ${answer.status} ${answer.text.slice(0, 160)}`);
    } else messages.set(route, error.message);
  }
  assert.ok(failures.length === 0, `routes that did not refuse ?${UNKNOWN}=5:\n  ${failures.join('\n  ')}`);
  assert.equal(new Set(messages.values()).size, 1, `one message for every route: ${JSON.stringify([...messages])}`);
  // A refused request is refused before the handler: no write happened, the sessions still work.
  assert.equal(await stateOf(f), before);
});

test(`without credentials, every route that needs them answers ?${UNKNOWN}=5 with 401 before it looks at the query (an anonymous caller learns nothing of schemas)`, async (f) => {
  const failures: string[] = [];
  for (const [route, row] of Object.entries(ROUTES)) {
    if (row.auth === 'none') continue;
    const answer = await send(f, route, { ...row, auth: 'none' }, { ...row.query?.(f), [UNKNOWN]: '5' });
    const expected = row.auth === 'bearer' ? 'invalid_api_key' : 'session_required';
    let code: unknown;
    try {
      code = answer.json().error?.code;
    } catch {}
    if (answer.status !== 401 || code !== expected) failures.push(`${route}: ${answer.status} ${answer.text.slice(0, 160)}`);
  }
  assert.ok(failures.length === 0, `routes that did not answer 401 first:\n  ${failures.join('\n  ')}`);
});

test('the known query parameters of each route still work', async (f) => {
  for (const [route, row] of Object.entries(ROUTES)) {
    if (!row.query) continue;
    const answer = await send(f, route, row, row.query(f));
    assert.is(answer.status, row.expect ?? 200, `${route}: ${answer.status} ${answer.text.slice(0, 300)}`);
    await row.check?.(f, answer, (query) => send(f, route, row, query));
  }
});

test('a parameter named by digits, or by nothing, is named as it was sent', async (f) => {
  const cases: Array<[string, string]> = [['?0=1', 'query.0: '], ['?12=x&limit=1', 'query.12: '], ['?=1', 'query: a parameter without a name']];
  for (const [search, start] of cases) {
    const response = await fetch(`${f.t.url}/v1/emails${search}`, { headers: { authorization: `Bearer ${f.apiKey}` } });
    const body = await response.json() as { error: { code: string; message: string } };
    assert.is(response.status, 400, search);
    assert.is(body.error.code, 'validation_error', search);
    assert.ok(body.error.message.startsWith(start), `${search}: ${body.error.message}`);
  }
});

test('pages, probes, /metrics and the documents keep ignoring parameters they do not take', async (f) => {
  // Page addresses name any record: the shell is the same for all. Files are named one by one.
  const files: Record<string, string> = { '/assets/:file': 'main.ts', '/assets/pages/:file': 'emails.ts' };
  for (const route of Object.keys(LENIENT)) {
    const path = route.slice(route.indexOf(' ') + 1);
    const url = path.replace(/:(\w+)/g, (_, name: string) => (name === 'file' ? files[path] : name === 'workspaceId' ? f.workspaceId : f.projectId));
    const response = await fetch(`${f.t.url}${url}?utm_source=newsletter&_=1700000000`, { headers: { cookie: f.owner.cookie } });
    const text = await response.text();
    assert.is(response.status, 200, `${route} (${LENIENT[route]}): ${response.status} ${text.slice(0, 200)}`);
  }
});

test.run();
