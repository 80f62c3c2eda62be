// An endpoint receives the events recorded after it was created (apps/api/INTERFACE-DECISIONS.md,
// Webhooks). An older event the webhooks processor handles late (its group behind after an
// outage, a record handed over again after a crash, a parked record retried) is not posted to an
// endpoint newer than it: that would replay history to it, which the spec rules out ("Manual
// replay is unavailable"). Shown with the group behind: Relay runs without its webhooks processor
// while an email is sent, then the endpoint is created, then Relay runs again with it. (An event
// recorded within ENDPOINT_CLOCK_SKEW_MS before the endpoint's creation counts as after it: the
// two times come from different clocks in distributed mode.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ENDPOINT_CLOCK_SKEW_MS } from '../apps/processors/webhooks.ts';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { startTestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { settle, waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { processorsCaughtUp } from './support/markers.ts';

const HOST = 'hooks.relay.test';

interface Ctx { ca: TestCa; dns: TestDnsServer; receiver: HttpsReceiver; dataDir: string }
const test = suite<Ctx>('webhooks: an endpoint created after an event');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-webhook-late-'));
});
test.after(async (ctx) => {
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

test('an email.sent recorded before the endpoint existed is not posted to it; one recorded after is', async (ctx) => {
  const env = { RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}` };
  const eventsFor = (emailId: string) => ctx.receiver.requests.filter((r) => JSON.parse(r.body).data.email_id === emailId);

  // Without the webhooks processor: the email is sent, its email.sent waits in the log.
  const before = await startTestApp(env, { dataDir: ctx.dataDir, processors: ['projector', 'sender'] });
  const tenant = await deliveryTenant(before);
  let early: string;
  try {
    early = await send(before, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', subject: 'early', text: 'hi' });
    await waitForDetail(before, tenant.key, early, (d) => d.status === 'sent', 'sent');
    // Past the allowance for the two clocks (the API's, the event store's): the endpoint comes later.
    await settle(ENDPOINT_CLOCK_SKEW_MS + 100);
    await createEndpoint(before.stores.documents, before.ctx.services.secrets, { dnsServers: [ctx.dns.address], allow: before.config.webhookAllow },
      { workspaceId: tenant.workspaceId, projectId: tenant.projectId, url: `https://${HOST}:${ctx.receiver.port}/h`, events: ['email.sent'] }, new Date());
  } finally {
    await before.close();
  }

  // With it: the group catches up on the early email's events, then handles a new one's.
  const after = await startTestApp(env, { dataDir: ctx.dataDir, processors: true });
  try {
    const late = await send(after, tenant.key, { from: `hello@${tenant.domain}`, to: 'bob@example.org', subject: 'late', text: 'hi' });
    await waitUntil(() => eventsFor(late).length === 1, 'the later email.sent posted to the endpoint');
    await processorsCaughtUp(after, ['webhooks']);
    assert.equal(eventsFor(early).map((r) => JSON.parse(r.body).type), [], 'the early email.sent reached an endpoint created after it');
    const earlyDetail = await waitForDetail(after, tenant.key, early, (d) => d.status === 'sent', 'still sent');
    assert.equal(earlyDetail.webhookDeliveries, []);
    const lateDetail = await waitForDetail(after, tenant.key, late, (d) => d.webhookDeliveries?.length === 1, 'its delivery listed');
    assert.match(lateDetail.webhookDeliveries[0].eventId, /_sent$/);
  } finally {
    await after.close();
  }
});

test.run();
