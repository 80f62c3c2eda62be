// A project's emails for its members (dashboard session): the same list and detail as an
// email:read key of the project gets, the message while it is retained (410 after), and the
// HTML part served alone under its own Content-Security-Policy.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { messageCsp } from '../apps/api/plugins/project-emails.ts';
import { createApiKey } from '../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { projectsOf } from '../apps/services/management/projects.ts';
import { BODY_RETENTION_MS } from '../apps/services/content-vault.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx {
  t: TestApp;
  owner: Caller;
  viewer: Caller;
  outsider: Caller;
  projectId: string;
  otherProjectId: string;
  key: string;
  htmlEmail: string;
  textEmail: string;
}

const test = suite<Ctx>('project emails for members');

async function send(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const response = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` }, payload: body });
  if (response.statusCode !== 202) throw new Error(`send: ${response.statusCode} ${response.body}`);
  return response.json().id;
}

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['projector'] });
  const t = ctx.t;
  ctx.owner = await newCaller(t, 'owner@pe.test');
  ctx.viewer = await newCaller(t, 'viewer@pe.test');
  ctx.outsider = await newCaller(t, 'outsider@pe.test');
  const { workspaceId, projectId } = await workspaceWithProject(t, ctx.owner);
  ctx.projectId = projectId;
  ctx.otherProjectId = (await workspaceWithProject(t, ctx.outsider)).projectId;
  await addMember(t, ctx.owner, workspaceId, ctx.viewer, 'viewer');
  const now = t.ctx.now();
  const domain = await createDomain(t.ctx.documents, { workspaceId, name: 'pe.test' }, now, t.ctx.services.secrets);
  await markDomainVerified(t.ctx.documents, domain._id, 'fixture', now);
  await connectDomain(t.ctx.documents, domain._id, projectId);
  const project = (await projectsOf(t.ctx.documents).get(projectId))!;
  ctx.key = (await createApiKey(t.ctx.documents, { project, name: 'k', permissions: ['email:send', 'email:read'] }, now)).secret;
  ctx.htmlEmail = await send(t, ctx.key, {
    from: 'Shop <shop@pe.test>', to: ['a@pe.test'], cc: 'c@pe.test', bcc: ['hidden@pe.test'], subject: 'With HTML',
    html: '<p>Hello <script>alert(1)</script></p>', text: 'Hello', headers: { 'X-Campaign': 'spring' }, tags: { kind: 'receipt' },
  });
  ctx.textEmail = await send(t, ctx.key, { from: 'shop@pe.test', to: 'b@pe.test', subject: 'Text only', text: 'Just text' });
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('a member lists the project\'s emails exactly as an email:read key of the project does, filters included', async (ctx) => {
  for (const query of ['', '?status=queued&limit=1', '?recipient=b@pe.test', '?sender=nobody@pe.test']) {
    const byKey = await ctx.t.app.inject({ url: `/v1/emails${query}`, headers: { authorization: `Bearer ${ctx.key}` } });
    const bySession = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails${query}`, { as: ctx.viewer });
    assert.is(bySession.statusCode, 200, query);
    assert.equal(bySession.json(), byKey.json(), query);
  }
  const detail = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}`, { as: ctx.viewer });
  const byKey = await ctx.t.app.inject({ url: `/v1/emails/${ctx.htmlEmail}`, headers: { authorization: `Bearer ${ctx.key}` } });
  assert.equal(detail.json(), byKey.json());
});

test('the message: addresses, the sender\'s headers and both parts, never the BCC', async (ctx) => {
  const response = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}/message`, { as: ctx.viewer });
  assert.is(response.statusCode, 200);
  assert.is(response.headers['cache-control'], 'private, no-store');
  const message = response.json();
  assert.is(message.from, 'Shop <shop@pe.test>');
  assert.equal(message.to, ['a@pe.test']);
  assert.equal(message.cc, ['c@pe.test']);
  assert.equal(message.headers, { 'X-Campaign': 'spring' });
  assert.is(message.html, '<p>Hello <script>alert(1)</script></p>');
  assert.is(message.text, 'Hello');
  assert.not.ok(response.body.includes('hidden@pe.test'));
});

test('the HTML part alone: its own policy (nothing runs, no remote image unless asked), nosniff, no referrer', async (ctx) => {
  const url = `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}/message.html`;
  const off = await call(ctx.t, 'GET', url, { as: ctx.viewer });
  assert.is(off.statusCode, 200);
  assert.is(off.headers['content-type'], 'text/html; charset=utf-8');
  assert.is(off.headers['content-security-policy'], "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'; form-action 'none'; base-uri 'none'; sandbox allow-popups allow-popups-to-escape-sandbox");
  assert.is(off.headers['x-content-type-options'], 'nosniff');
  assert.is(off.headers['referrer-policy'], 'no-referrer');
  assert.is(off.body, '<base target="_blank"><p>Hello <script>alert(1)</script></p>');
  const on = await call(ctx.t, 'GET', `${url}?remote_images=on`, { as: ctx.viewer });
  assert.is(on.headers['content-security-policy'], messageCsp(true));
  assert.match(messageCsp(true), /img-src data: https: http:;/);
  const textOnly = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails/${ctx.textEmail}/message.html`, { as: ctx.viewer });
  assert.is(textOnly.statusCode, 404);
});

test('the HTML part is answered to the dashboard\'s frame, and refused to a browser opening it as a page of its own', async (ctx) => {
  const url = `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}/message.html`;
  const framed = await call(ctx.t, 'GET', url, { as: ctx.viewer, headers: { 'sec-fetch-dest': 'iframe' } });
  assert.is(framed.statusCode, 200);
  assert.is(framed.body, '<base target="_blank"><p>Hello <script>alert(1)</script></p>');
  const opened = await call(ctx.t, 'GET', url, { as: ctx.viewer, headers: { 'sec-fetch-dest': 'document' } });
  assert.is(opened.statusCode, 403);
  assert.is(errorCode(opened), 'forbidden');
  assert.not.ok(opened.body.includes('Hello'));
});

test('outsiders are refused, an email of another project is not found, and no session is 401', async (ctx) => {
  const paths = ['', `/${ctx.htmlEmail}`, `/${ctx.htmlEmail}/message`, `/${ctx.htmlEmail}/message.html`];
  for (const path of paths) {
    const outsider = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails${path}`, { as: ctx.outsider });
    assert.is(outsider.statusCode, 403, path);
    const anonymous = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails${path}`);
    assert.is(errorCode(anonymous), 'session_required', path);
  }
  for (const path of paths.slice(1)) {
    const elsewhere = await call(ctx.t, 'GET', `/v1/projects/${ctx.otherProjectId}/emails${path}`, { as: ctx.outsider });
    assert.is(elsewhere.statusCode, 404, path);
  }
});

test('after seven days the bodies are gone: 410 content_expired, while the detail remains', async (ctx) => {
  ctx.t.clock.advance(BODY_RETENTION_MS + 1000);
  try {
    for (const path of ['message', 'message.html']) {
      const response = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}/${path}`, { as: ctx.viewer });
      assert.is(response.statusCode, 410, path);
      assert.is(errorCode(response), 'content_expired');
    }
    assert.is((await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/emails/${ctx.htmlEmail}`, { as: ctx.viewer })).statusCode, 200);
  } finally {
    ctx.t.clock.advance(-(BODY_RETENTION_MS + 1000));
  }
});

test.run();
