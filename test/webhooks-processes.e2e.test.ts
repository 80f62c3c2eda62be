// The webhooks processor as ops run it (`relay processor webhooks`, its own process, the test
// CA trusted through NODE_EXTRA_CA_CERTS), SIGKILLed in the middle of a retry schedule: after
// the restart the schedule completes and no delivery is lost.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const HOST = 'hooks.relay.test';

interface Context {
  dataDir: string;
  ca: TestCa;
  dns: TestDnsServer;
  receiver: HttpsReceiver;
  t: TestApp;
  tenant: DeliveryTenant;
  env: Record<string, string>;
  dispatchers: RelayProcess[];
}

const test = suite<Context>('webhooks processor (embedded, real processes)');

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-hooks-'));
  ctx.dispatchers = [];
  ctx.ca = makeTestCa();
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.env = {
    RELAY_DATA_DIR: ctx.dataDir,
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}`,
    // 60 ms, 300 ms, 900 ms, 3.6 s, …
    RELAY_WEBHOOK_RETRY_SCALE: '0.001',
  };
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: ['projector', 'sender'] });
  ctx.tenant = await deliveryTenant(ctx.t);
  await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow },
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url: `https://${HOST}:${ctx.receiver.port}/hooks`, events: ['email.sent'] }, new Date());
});

test.after(async (ctx) => {
  for (const d of ctx.dispatchers) await d.kill();
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function startDispatcher(ctx: Context): Promise<RelayProcess> {
  const port = await freePort();
  const child = spawnRelay(['processor', 'webhooks'], { ...ctx.env, PORT: String(port), NODE_EXTRA_CA_CERTS: ctx.ca.caFile });
  ctx.dispatchers.push(child);
  await waitForReady(`http://127.0.0.1:${port}`, child, 60_000);
  return child;
}

test('SIGKILL mid-schedule: after the restart the remaining attempts are made and the event is acknowledged', async (ctx) => {
  const first = await startDispatcher(ctx);
  let answered = 0;
  ctx.receiver.answer = () => {
    answered++;
    // The second failure kills the dispatcher while its retry is scheduled.
    if (answered === 2) setImmediate(() => first.child.kill('SIGKILL'));
    return { status: answered <= 3 ? 500 : 200 };
  };
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'killed mid-schedule', text: 'hi' });
  await first.exited;
  assert.ok(answered >= 2);
  await startDispatcher(ctx);
  await waitUntil(async () => (await detail(ctx.t, ctx.tenant.key, id)).webhookDeliveries.some((d: { status: string }) => d.status === 'succeeded'), 'the delivery succeeded after the restart', 60_000);
  const [delivery] = (await detail(ctx.t, ctx.tenant.key, id)).webhookDeliveries;
  const codes = delivery.attemptLogs.map((l: { httpStatus: number | null }) => l.httpStatus);
  // An attempt whose outcome the kill cut off is made again once its lease ends (at least once).
  assert.equal(codes.slice(-1), [200]);
  assert.ok(answered >= 4, `the receiver answered ${answered} requests`);
  assert.equal(ctx.receiver.requests.slice(-1).length, 1);
  assert.is(new Set(ctx.receiver.requests.map((r) => r.headers['relay-event-id'])).size, 1, 'one event id throughout');
  assert.is(new Set(ctx.receiver.requests.map((r) => r.body)).size, 1, 'one body throughout');
  assert.is(ctx.receiver.requests.length, answered);
});

test.run();
