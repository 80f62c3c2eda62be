// The template endpoints on the embedded adapters; test/templates.distributed.int.test.ts runs
// the same suite on the distributed document store.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createUser } from '../apps/services/management/users.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, PASSWORD, sessionCookieFrom, workspaceWithProject } from './support/management.ts';
import { templateApiSuite } from './support/template-api-suite.ts';
import { DASHBOARD_ORIGIN, templates } from './support/templates.ts';

templateApiSuite('embedded');

// Spec, Authentication 5: the session cookie is __Host-rr_session in production.
const production = suite<{ t: TestApp }>('template endpoints in production');

production.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN });
});
production.after(async (ctx) => {
  await ctx.t?.close();
});

production('the session travels in __Host-rr_session; the same token under rr_session is no session (401)', async ({ t }) => {
  await createUser(t.ctx.documents, { email: 'templates@prod.test', password: PASSWORD }, t.ctx.now());
  const login = await call(t, 'POST', '/v1/session', { body: { email: 'templates@prod.test', password: PASSWORD } });
  assert.is(login.statusCode, 200, login.body);
  const cookie = sessionCookieFrom(login, '__Host-rr_session');
  const owner = { userId: '', email: 'templates@prod.test', cookie };
  const { projectId } = await workspaceWithProject(t, owner);
  const created = await templates(t, 'POST', '/v1/templates', { as: cookie, projectId, body: { name: 'n', slug: 'prod', subject: 's', text: 't' } });
  assert.is(created.statusCode, 201, created.body);
  assert.is((await templates(t, 'GET', '/v1/templates', { as: cookie, projectId })).statusCode, 200);
  const developmentName = `rr_session=${cookie.split('=')[1]}`;
  const refused = await templates(t, 'GET', '/v1/templates', { as: developmentName, projectId });
  assert.is(refused.statusCode, 401, refused.body);
  assert.is(refused.json().error.code, 'session_required');
});

production.run();
