// A sending domain's name must leave room for the record names built from it
// (<selector>._domainkey.<domain>, bounce.<domain>) within the 253 characters of a DNS name:
// a longer name is refused with 400 naming the maximum (225 with Relay's 16-character selectors),
// before anything is stored, and the longest allowed name is created and listed. A domain stored
// before that rule (inserted directly here) shows no records and does not break its workspace's
// list, which never answers 5xx.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { domainsOf } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller }
const test = suite<Ctx>('sending domain names and the length of their records');
test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_MAIL_HOST: 'mx.relay.test' });
  ctx.owner = await newCaller(ctx.t, 'owner@long-domain.test');
});
test.after(async (ctx) => { await ctx.t.close(); });

test('a 240-character domain is refused with 400 naming the maximum; nothing is stored; the list answers 200', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const label = 'a'.repeat(63);
  const name = `${label}.${label}.${label}.${'b'.repeat(40)}.example`; // 63*3+40+7+4 dots = 240
  assert.is(name.length, 240);
  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name } });
  const list = await call(t, 'GET', `/v1/workspaces/${workspaceId}/domains`, { as: owner });
  assert.equal(
    { create: created.statusCode, code: created.json().error?.code ?? created.json().code, list: list.statusCode, domains: list.json().domains?.length },
    { create: 400, code: 'validation_error', list: 200, domains: 0 },
    `create: ${created.statusCode} ${created.body}; list afterwards: ${list.statusCode} ${list.body}`,
  );
  assert.match(created.body, /at most 225/);
});

test('a 225-character domain is created with records within 253 characters; 226 is refused', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const label = 'c'.repeat(63);
  const name = (extra: number) => `${label}.${label}.${label}.${'d'.repeat(25 + extra)}.example`; // 225 + extra
  assert.is(name(0).length, 225);
  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: name(0) } });
  assert.is(created.statusCode, 201, created.body);
  const records = created.json().records as Array<{ name: string }>;
  assert.ok(records.length > 0 && records.every((r) => r.name.length <= 253), JSON.stringify(records.map((r) => r.name.length)));
  const tooLong = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: name(1) } });
  assert.is(tooLong.statusCode, 400, tooLong.body);
});

test('a stored domain too long for its records shows none, and its workspace\'s list still answers 200', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  const name = `${'e'.repeat(63)}.${'e'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(50)}.example`; // 63*3+50+7+4 dots = 250
  await domainsOf(t.ctx.documents).insert({
    _id: 'dom_toolongforrecords', workspaceId, name, dkimSelector: 'rr20250301abcdef', dkimPublicKeyBase64: 'AAAA', dkimPrivateKeySealed: 'x',
    mailFromSubdomain: 'bounce', status: 'pending', checks: null, lastCheckedAt: null, verifiedAt: null, verifiedBy: null, operatorNote: null,
    projectIds: [], createdAt: new Date().toISOString(),
  });
  const list = await call(t, 'GET', `/v1/workspaces/${workspaceId}/domains`, { as: owner });
  assert.is(list.statusCode, 200, list.body);
  assert.equal(list.json().domains.map((d: { name: string; records: unknown[] }) => [d.name, d.records]), [[name, []]]);
  const verify = await call(t, 'POST', '/v1/domains/dom_toolongforrecords/verify', { as: owner });
  assert.is(verify.statusCode, 400, verify.body);
});

test.run();
