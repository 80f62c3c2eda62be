// Webhook endpoints through the session API: write roles create, change, rotate and delete;
// members read; the secret shows only at creation and rotation, and is stored sealed; URLs
// that could point inside are refused, naming the rule; the length limit holds for the URL as
// stored.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Context {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  viewer: Caller;
  outsider: Caller;
  projectId: string;
}

const test = suite<Context>('webhook endpoints API');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([
    { name: 'hooks.example.com', type: 'A', data: '8.8.8.8' },
    { name: 'inside.example.com', type: 'A', data: '10.1.2.3' },
    { name: 'mixed.example.com', type: 'A', data: '8.8.4.4' },
    { name: 'mixed.example.com', type: 'A', data: '127.0.0.1' },
  ]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address });
  ctx.owner = await newCaller(ctx.t, 'owner@hooks.test');
  ctx.viewer = await newCaller(ctx.t, 'viewer@hooks.test');
  ctx.outsider = await newCaller(ctx.t, 'outsider@hooks.test');
  const { workspaceId, projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  await addMember(ctx.t, ctx.owner, workspaceId, ctx.viewer, 'viewer');
  ctx.projectId = projectId;
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

const create = (ctx: Context, body: Record<string, unknown>, as: Caller = ctx.owner) =>
  call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as, body });

test('create → 201 with the secret once; reads never show it; it is stored sealed', async (ctx) => {
  const created = await create(ctx, { url: 'https://hooks.example.com/relay', events: ['email.sent', 'email.bounced'], description: 'main' });
  assert.is(created.statusCode, 201, created.body);
  const body = created.json();
  assert.match(body.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  assert.equal(Object.keys(body).sort(), ['createdAt', 'description', 'enabled', 'events', 'id', 'projectId', 'secret', 'updatedAt', 'url']);
  const read = await call(ctx.t, 'GET', `/v1/webhook-endpoints/${body.id}`, { as: ctx.viewer });
  assert.is(read.statusCode, 200);
  assert.not.ok('secret' in read.json());
  const list = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.viewer });
  assert.equal(list.json().endpoints.map((e: { id: string }) => e.id), [body.id]);
  assert.not.match(list.body, /whsec_/);
  const stored = await ctx.t.stores.documents.collection(COLLECTIONS.webhookEndpoints).get(body.id);
  assert.not.ok(JSON.stringify(stored).includes(body.secret), 'the secret is not stored in clear');
});

test('patch, rotate, delete; the rotated secret differs and shows once', async (ctx) => {
  const { id, secret } = (await create(ctx, { url: 'https://hooks.example.com/b', events: ['email.sent'] })).json();
  const patched = await call(ctx.t, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: false, events: ['email.failed', 'email.failed'], description: null } });
  assert.is(patched.statusCode, 200, patched.body);
  assert.equal([patched.json().enabled, patched.json().events, patched.json().description], [false, ['email.failed'], null]);
  const rotated = await call(ctx.t, 'POST', `/v1/webhook-endpoints/${id}/rotate-secret`, { as: ctx.owner });
  assert.is(rotated.statusCode, 200);
  assert.match(rotated.json().secret, /^whsec_/);
  assert.is.not(rotated.json().secret, secret);
  const deleted = await call(ctx.t, 'DELETE', `/v1/webhook-endpoints/${id}`, { as: ctx.owner });
  assert.is(deleted.statusCode, 200);
  assert.is((await call(ctx.t, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.owner })).statusCode, 404);
});

test('viewers read but do not change; outsiders get 404/403; no session is 401', async (ctx) => {
  const { id } = (await create(ctx, { url: 'https://hooks.example.com/c', events: ['email.sent'] })).json();
  assert.is((await create(ctx, { url: 'https://hooks.example.com/d', events: ['email.sent'] }, ctx.viewer)).statusCode, 403);
  assert.is((await call(ctx.t, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.viewer, body: { enabled: false } })).statusCode, 403);
  assert.is((await call(ctx.t, 'POST', `/v1/webhook-endpoints/${id}/rotate-secret`, { as: ctx.viewer })).statusCode, 403);
  assert.is((await call(ctx.t, 'DELETE', `/v1/webhook-endpoints/${id}`, { as: ctx.viewer })).statusCode, 403);
  const outsider = await call(ctx.t, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.outsider });
  assert.ok([403, 404].includes(outsider.statusCode));
  assert.is((await call(ctx.t, 'GET', `/v1/webhook-endpoints/${id}`, { as: null })).statusCode, 401);
});

test('the 2048-character URL limit holds for the URL as stored (normalized, non-ASCII percent-encoded), so the URL as returned is accepted back', async (ctx) => {
  const base = 'https://hooks.example.com/';
  // An "é" is six characters normalized (%C3%A9): 337 of them bring the stored URL to 2048.
  const tooLong = await create(ctx, { url: `${base}${'é'.repeat(338)}`, events: ['email.sent'] });
  assert.is(tooLong.statusCode, 400, tooLong.body.slice(0, 300));
  assert.is(errorCode(tooLong), 'validation_error');
  assert.match(tooLong.json().error.message, /at most 2048 characters/);
  const created = await create(ctx, { url: `${base}${'é'.repeat(337)}`, events: ['email.sent'] });
  assert.is(created.statusCode, 201, created.body.slice(0, 300));
  const stored = created.json().url as string;
  assert.is(stored, `${base}${'%C3%A9'.repeat(337)}`);
  const patched = await call(ctx.t, 'PATCH', `/v1/webhook-endpoints/${created.json().id}`, { as: ctx.owner, body: { url: stored, events: ['email.sent', 'email.delivered'] } });
  assert.is(patched.statusCode, 200, patched.body.slice(0, 300));
  assert.is(patched.json().url, stored);
});

test('a description of 500 characters is taken however many UTF-16 units they are (500 emoji), 501 is refused', async (ctx) => {
  const url = 'https://hooks.example.com/described';
  const taken = await create(ctx, { url, events: ['email.sent'], description: '🔑'.repeat(500) });
  assert.is(taken.statusCode, 201, taken.body.slice(0, 300));
  assert.is(taken.json().description, '🔑'.repeat(500));
  const refused = await create(ctx, { url, events: ['email.sent'], description: '🔑'.repeat(501) });
  assert.is(refused.statusCode, 400);
  assert.match(refused.json().error.message, /at most 500 characters/);
});

const refusals: Array<[string, Record<string, unknown>, number, RegExp]> = [
  ['http', { url: 'http://hooks.example.com/x', events: ['email.sent'] }, 400, /https/],
  ['another port', { url: 'https://hooks.example.com:8443/x', events: ['email.sent'] }, 400, /443/],
  ['credentials', { url: 'https://user:pass@hooks.example.com/x', events: ['email.sent'] }, 400, /user|password|credential/i],
  ['an IP literal', { url: 'https://8.8.8.8/x', events: ['email.sent'] }, 400, /IP|address|name/i],
  ['a decimal IPv4', { url: 'https://2130706433/x', events: ['email.sent'] }, 400, /IP|address|name/i],
  ['an IPv6 literal', { url: 'https://[::1]/x', events: ['email.sent'] }, 400, /IP|address|name/i],
  ['a name resolving to a private address', { url: 'https://inside.example.com/x', events: ['email.sent'] }, 422, /public addresses only/],
  ['a name with a loopback answer among public ones', { url: 'https://mixed.example.com/x', events: ['email.sent'] }, 422, /public addresses only/],
  ['no events', { url: 'https://hooks.example.com/x', events: [] }, 400, /event/],
  ['an unknown event type', { url: 'https://hooks.example.com/x', events: ['email.opened'] }, 400, /email\.opened/],
  ['an unknown property', { url: 'https://hooks.example.com/x', events: ['email.sent'], secret: 'mine' }, 400, /secret|allowed/],
];
for (const [what, body, status, message] of refusals) {
  test(`refused: ${what} (${status}, the rule named)`, async (ctx) => {
    const response = await create(ctx, body);
    assert.is(response.statusCode, status, response.body);
    assert.is(errorCode(response), status === 422 ? 'unsafe_destination' : 'validation_error');
    assert.match(response.json().error.message, message);
  });
}

test('a name that does not exist, one with no address, one that fails to resolve and one inside 10.0.0.0/8 are answered alike: no oracle for internal DNS', async (ctx) => {
  const hosts = ['inside.example.com', 'nowhere.example.com', 'noaddress.example.com', 'broken.example.com'];
  ctx.dns.setZone([
    { name: 'hooks.example.com', type: 'A', data: '8.8.8.8' },
    { name: 'inside.example.com', type: 'A', data: '10.1.2.3' },
    { name: 'noaddress.example.com', type: 'TXT', data: 'v=nothing' },
    { name: 'broken.example.com', type: 'SERVFAIL' },
  ]);
  const answers = [];
  for (const host of hosts) {
    for (const method of ['POST', 'PATCH'] as const) {
      const response = method === 'POST'
        ? await create(ctx, { url: `https://${host}/x`, events: ['email.sent'] })
        : await call(ctx.t, 'PATCH', `/v1/webhook-endpoints/${(await create(ctx, { url: 'https://hooks.example.com/p', events: ['email.sent'] })).json().id}`, { as: ctx.owner, body: { url: `https://${host}/x` } });
      // The host is the only difference, and it is the caller's own input.
      answers.push(`${method} ${response.statusCode} ${response.body.replaceAll(host, '<host>')}`);
    }
  }
  assert.is(new Set(answers.filter((a) => a.startsWith('POST'))).size, 1, answers.join('\n'));
  assert.is(new Set(answers.filter((a) => a.startsWith('PATCH'))).size, 1, answers.join('\n'));
  assert.match(answers[0], /^POST 422 .*unsafe_destination/);
  assert.not.match(answers.join('\n'), /10\.0\.0\.0|private|does not exist in DNS|ESERVFAIL/);
});

test.run();
