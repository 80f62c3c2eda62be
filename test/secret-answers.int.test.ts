// Every answer that shows a secret once carries Cache-Control: no-store, so that no cache on
// the way (or the browser's own) keeps the only copy: the session cookie at sign-in, an API
// key at creation, a webhook signing secret at creation and at rotation.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { call, newCaller, PASSWORD, workspaceWithProject, type Caller } from './support/management.ts';

interface Context { dns: TestDnsServer; t: TestApp; owner: Caller; projectId: string }

const test = suite<Context>('answers that show a secret once');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([{ name: 'hooks.example.com', type: 'A', data: '8.8.8.8' }]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address });
  ctx.owner = await newCaller(ctx.t, 'owner@secrets.test');
  ctx.projectId = (await workspaceWithProject(ctx.t, ctx.owner)).projectId;
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

test('sign-in: the answer that sets the session cookie is no-store', async (ctx) => {
  const response = await call(ctx.t, 'POST', '/v1/session', { body: { email: ctx.owner.email, password: PASSWORD } });
  assert.is(response.statusCode, 200, response.body);
  assert.match(String(response.headers['set-cookie']), /rr_session=/);
  assert.is(response.headers['cache-control'], 'no-store');
});

test('API key creation: the answer with the key is no-store', async (ctx) => {
  const response = await call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'ci', permissions: ['email:send'] } });
  assert.is(response.statusCode, 201, response.body);
  assert.match(response.json().secret, /^rr_test_/);
  assert.is(response.headers['cache-control'], 'no-store');
});

test('webhook endpoint creation and secret rotation: both answers with whsec_… are no-store', async (ctx) => {
  const created = await call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.owner, body: { url: 'https://hooks.example.com/relay', events: ['email.sent'] } });
  assert.is(created.statusCode, 201, created.body);
  assert.match(created.json().secret, /^whsec_/);
  assert.is(created.headers['cache-control'], 'no-store');
  const rotated = await call(ctx.t, 'POST', `/v1/webhook-endpoints/${created.json().id}/rotate-secret`, { as: ctx.owner });
  assert.is(rotated.statusCode, 200, rotated.body);
  assert.match(rotated.json().secret, /^whsec_/);
  assert.is(rotated.headers['cache-control'], 'no-store');
});

test.run();
