// The outbox (RELAY_DELIVERY=outbox) as members and integrators see it: what the transport
// says about a write never names the server's paths (timelines, webhook data.reason); the raw
// answer is an attachment a browser will not sniff or render; and the files, which hold body
// and BCC, go with the content key: retention deletes them, and the API and `relay outbox
// show` then say the content expired.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startRetention } from '../apps/pipeline/retention.ts';
import { BODY_RETENTION_MS } from '../apps/services/content-vault.ts';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { detail, send, waitForDetail } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { call, errorCode, newCaller, type Caller } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

const HOST = 'hooks.outbox.test';
const DOMAIN = 'outbox-surfaces.test';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  receiver: HttpsReceiver;
  t: TestApp;
  owner: Caller;
  projectId: string;
  key: string;
  outbox: string;
}

const test = suite<Context>('outbox: what it shows, and how long');

async function must(response: Promise<{ statusCode: number; body: string; json(): any }>, status: number) {
  const r = await response;
  if (r.statusCode !== status) throw new Error(`fixture: ${r.statusCode} ${r.body}`);
  return r.json();
}

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}` }, { processors: true });
  ctx.outbox = join(ctx.t.config.dataDir, 'outbox');
  const t = ctx.t;
  ctx.owner = await newCaller(t, `owner@${DOMAIN}`);
  const workspaceId = (await must(call(t, 'POST', '/v1/workspaces', { as: ctx.owner, body: { name: 'Outbox' } }), 201)).id;
  ctx.projectId = (await must(call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: ctx.owner, body: { name: 'Main', environment: 'development' } }), 201)).id;
  const domainId = (await must(call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: ctx.owner, body: { name: DOMAIN } }), 201)).id;
  await markDomainVerified(t.ctx.documents, domainId, 'test domain', t.ctx.now());
  await must(call(t, 'POST', `/v1/domains/${domainId}/projects/${ctx.projectId}`, { as: ctx.owner }), 200);
  ctx.key = (await must(call(t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'k', permissions: ['email:send', 'email:read'] } }), 201)).secret;
  await must(call(t, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.owner, body: { url: `https://${HOST}:${ctx.receiver.port}/hooks`, events: ['email.sent'] } }), 201);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

const sendOne = (ctx: Context, subject: string) =>
  send(ctx.t, ctx.key, { from: `app@${DOMAIN}`, to: `ann@${DOMAIN}`, bcc: `hidden@${DOMAIN}`, subject, text: `the body of ${subject}` });

const rawCopy = (ctx: Context, emailId: string) => call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/outbox/${emailId}`, { as: ctx.owner });

test('the timeline and the email.sent webhook say where the message went without naming the server\'s directories', async (ctx) => {
  const id = await sendOne(ctx, 'Paths');
  const sent = await waitForDetail(ctx.t, ctx.key, id, (d) => d.status === 'sent', 'is sent');
  await waitUntil(() => ctx.receiver.requests.some((r) => JSON.parse(r.body).data.email_id === id), 'the email.sent webhook arrives');
  const hook = ctx.receiver.requests.find((r) => JSON.parse(r.body).data.email_id === id)!;
  const timeline = JSON.stringify(sent);
  assert.match(timeline, `written to the outbox as ${id}.eml`);
  assert.is(JSON.parse(hook.body).data.reason, `written to the outbox as ${id}.eml`);
  for (const shown of [timeline, hook.body]) {
    assert.not.ok(shown.includes(ctx.t.config.dataDir), `the data directory is not shown: ${shown}`);
    assert.not.match(shown, /written to \//);
  }
});

test('the raw answer is an attachment with nosniff: a browser saves it, never renders the sender\'s HTML on this origin', async (ctx) => {
  const id = await sendOne(ctx, 'Headers');
  await waitUntil(() => existsSync(join(ctx.outbox, `${id}.eml`)), 'the message is in the outbox');
  const response = await rawCopy(ctx, id);
  assert.is(response.statusCode, 200, response.body);
  assert.match(String(response.headers['content-type']), /^message\/rfc822/);
  assert.is(response.headers['x-content-type-options'], 'nosniff');
  assert.is(response.headers['content-disposition'], `attachment; filename="${id}.eml"`);
  assert.match(response.body, 'the body of Headers');
});

test('retention deletes the outbox copies (body and BCC) of expired emails only; the API and `relay outbox show` then say the content expired', async (ctx) => {
  const old = await sendOne(ctx, 'Old');
  await waitUntil(() => existsSync(join(ctx.outbox, `${old}.eml`)) && existsSync(join(ctx.outbox, `${old}.envelope.json`)), 'the old message is in the outbox');
  ctx.t.clock.advance(BODY_RETENTION_MS + 60_000);
  const young = await sendOne(ctx, 'Young');
  await waitUntil(() => existsSync(join(ctx.outbox, `${young}.envelope.json`)), 'the young message is in the outbox');

  // Past retention a copy is no longer served, even before the sweep has deleted it.
  const beforeSweep = await rawCopy(ctx, old);
  assert.is(beforeSweep.statusCode, 410, beforeSweep.body);
  assert.is(errorCode(beforeSweep), 'content_expired');

  let deleted = -1;
  const retention = await startRetention({
    documents: ctx.t.stores.documents, events: ctx.t.stores.events, deliveryPolicy: ctx.t.ctx.services.policies.delivery,
    now: () => ctx.t.clock.now(), outboxDir: ctx.outbox, onOutboxDeleted: (n) => (deleted = n),
  });
  await retention.stop();
  assert.ok(deleted >= 1, 'the sweep reports what it deleted (this file\'s earlier emails expired too)');
  const left = readdirSync(ctx.outbox).filter((name) => name.startsWith(old));
  assert.equal(left, [], 'neither the .eml nor the .envelope.json of the expired email is on disk');
  assert.ok(existsSync(join(ctx.outbox, `${young}.eml`)) && existsSync(join(ctx.outbox, `${young}.envelope.json`)), 'the young email keeps its copy');

  const expired = await rawCopy(ctx, old);
  assert.is(expired.statusCode, 410, expired.body);
  assert.is(errorCode(expired), 'content_expired');
  assert.match(expired.json().error.message, /expired/);
  assert.is((await rawCopy(ctx, young)).statusCode, 200);
  const listed = await call(ctx.t, 'GET', `/v1/projects/${ctx.projectId}/outbox`, { as: ctx.owner });
  assert.not.ok(listed.json().messages.some((m: { emailId: string }) => m.emailId === old));
  // The email itself is still there: only its content went.
  assert.is((await detail(ctx.t, ctx.key, old)).id, old);

  const shown = await runRelay(['outbox', 'show', old], { RELAY_DATA_DIR: ctx.t.config.dataDir });
  assert.is(shown.code, 1, shown.stderr);
  assert.match(shown.stderr, `the content of ${old} has expired`);
  assert.is(shown.stdout, '');
});

test.run();
