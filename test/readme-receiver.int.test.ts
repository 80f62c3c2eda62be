// The webhook receiver printed in docs/webhooks.md, run as it is (extracted from that page) as a
// real HTTPS receiver of Relay's webhooks: it verifies and records what Relay signs, and
// refuses a tampered body and a stale timestamp.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { freePort } from './support/relay-process.ts';

const RECEIVER_DOC = fileURLToPath(new URL('../docs/webhooks.md', import.meta.url));
const HOST = 'receiver.relay.test';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  t: TestApp;
  tenant: DeliveryTenant;
  receiver: ChildProcess;
  port: number;
  secret: string;
  printed: string;
}

const test = suite<Context>("docs/webhooks.md's webhook receiver");

function readmeReceiver(): string {
  const readme = readFileSync(RECEIVER_DOC, 'utf8');
  const block = /```js\n(\/\/ receiver\.mjs[\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('docs/webhooks.md has no ```js block starting with "// receiver.mjs"');
  return block[1];
}

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  const cert = ctx.ca.issue([HOST]);
  writeFileSync(join(ctx.ca.dir, 'receiver.key'), cert.key);
  writeFileSync(join(ctx.ca.dir, 'receiver.pem'), cert.cert);
  writeFileSync(join(ctx.ca.dir, 'receiver.mjs'), readmeReceiver());
  ctx.port = await freePort();
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.port}` }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.secret = (await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow },
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url: `https://${HOST}:${ctx.port}/`, events: ['email.sent'] }, new Date())).secret;
  ctx.printed = '';
  ctx.receiver = spawn(process.execPath, [join(ctx.ca.dir, 'receiver.mjs')], {
    env: { ...process.env, RELAY_WEBHOOK_SECRET: ctx.secret, TLS_KEY: join(ctx.ca.dir, 'receiver.key'), TLS_CERT: join(ctx.ca.dir, 'receiver.pem'), PORT: String(ctx.port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ctx.receiver.stdout!.on('data', (d) => (ctx.printed += d));
  let ready = '';
  ctx.receiver.stderr!.on('data', (d) => (ready += d));
  await waitUntil(() => ready.includes('listening'), 'the receiver listens');
});

test.after(async (ctx) => {
  ctx.receiver.kill();
  await ctx.t.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

/** A request to the receiver signed (or not) as the test says: its status code. */
function post(ctx: Context, body: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: ctx.port, servername: HOST, method: 'POST', path: '/', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sign = (secret: string, timestamp: number, body: string) => `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;

test('it accepts what Relay sends: the email.sent event is verified and recorded', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'README receiver', text: 'hi' });
  await waitUntil(() => ctx.printed.includes(id), 'the receiver recorded the event');
  const event = JSON.parse(ctx.printed.trim().split('\n').find((l) => l.includes(id))!);
  assert.is(event.type, 'email.sent');
  assert.is(event.data.email_id, id);
});

test('it refuses a tampered body and a stale timestamp, and accepts the same request intact and fresh', async (ctx) => {
  const body = JSON.stringify({ id: 'evt_test', type: 'email.sent', created_at: new Date().toISOString(), data: { email_id: 'em_x' } });
  const now = Math.floor(Date.now() / 1000);
  assert.is(await post(ctx, body.replace('em_x', 'em_y'), { 'relay-timestamp': String(now), 'relay-signature': sign(ctx.secret, now, body) }), 400, 'tampered body');
  const stale = now - 301;
  assert.is(await post(ctx, body, { 'relay-timestamp': String(stale), 'relay-signature': sign(ctx.secret, stale, body) }), 400, 'stale timestamp');
  assert.is(await post(ctx, body, { 'relay-timestamp': String(now), 'relay-signature': sign('whsec_another', now, body) }), 400, 'another secret');
  assert.is(await post(ctx, body, {}), 400, 'unsigned');
  assert.is(await post(ctx, body, { 'relay-timestamp': String(now), 'relay-signature': sign(ctx.secret, now, body) }), 204);
});

test.run();
