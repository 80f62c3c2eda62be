// An endpoint that stops subscribing to an event type (PATCH events) gets no more of that type:
// its pending retries of it end without a request (`endpoint_unsubscribed` in their attempt log,
// counted on /metrics) shortly after the change, or, for one whose request is in flight at the
// change, once that attempt is recorded (the prompt ending through the HTTP API, with a retry
// far off: webhook-unsubscribe-ending.int.test.ts). Subscribing again does not bring back a delivery ended so; new
// events of the type are delivered. The first suite runs the whole app with its processors and a
// real HTTPS receiver; the second runs one attempt on the embedded store with a stand-in egress.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { attemptWebhookDelivery } from '../apps/services/webhooks/attempt.ts';
import { deliveriesOf, type WebhookDelivery } from '../apps/services/webhooks/deliveries.ts';
import { DeliveryEndings } from '../apps/services/webhooks/delivery-endings.ts';
import { createEndpoint, endpointsOf, updateEndpoint, type EndpointPolicy } from '../apps/services/webhooks/endpoints.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';

const SCALE = 0.02; // first retry 1.2 s after the first attempt
const HOST = 'hooks.relay.test';

interface Ctx { ca: TestCa; dns: TestDnsServer; receiver: HttpsReceiver; t: TestApp; tenant: DeliveryTenant; policy: EndpointPolicy; endings: DeliveryEndings }
const app = suite<Ctx>('webhooks: an event type taken out of an endpoint\'s events');

app.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.t = await startTestApp({
    RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}`, RELAY_WEBHOOK_RETRY_SCALE: String(SCALE),
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.policy = { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow };
  // Counting what it ends on /metrics, as the route's does.
  ctx.endings = new DeliveryEndings({
    documents: ctx.t.stores.documents, now: () => new Date(), onError: (e) => { throw e; },
    onEnded: (reason, count) => ctx.t.ctx.metrics.webhookAttempts(reason).inc(count),
  });
});
app.after(async (ctx) => {
  await ctx.endings.stop();
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

const sentTo = (ctx: Ctx, emailId: string) =>
  ctx.receiver.requests.filter((r) => r.headers['relay-event-id']?.endsWith('_sent') && JSON.parse(r.body).data.email_id === emailId).length;

async function unsubscribedCounted(ctx: Ctx): Promise<number> {
  const page = await ctx.t.app.inject({ method: 'GET', url: '/metrics' });
  return samplesOf(parseMetrics(page.body), 'relay_webhook_attempts_total', { result: 'endpoint_unsubscribed' }).reduce((sum, s) => sum + s.value, 0);
}

app('after PATCH events drops email.sent, its pending email.sent retry ends without a request; subscribing again does not send it, only new events', async (ctx) => {
  const { endpoint } = await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, ctx.policy,
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url: `https://${HOST}:${ctx.receiver.port}/h`, events: ['email.sent', 'email.bounced'] }, new Date());
  ctx.receiver.answer = () => ({ status: 500 });
  const emailId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'x', text: 'hi' });
  const delivery = async () => (await deliveriesOf(ctx.t.stores.documents).find({ where: { emailId, endpointId: endpoint._id } }))[0];
  await waitUntil(async () => (await delivery())?.attemptLogs.length === 1, 'first attempt failed', 15_000);
  assert.is(sentTo(ctx, emailId), 1);
  const countedBefore = await unsubscribedCounted(ctx);

  // PATCH /v1/webhook-endpoints/:id {events: ['email.bounced']} (the route calls exactly this).
  await updateEndpoint(ctx.t.stores.documents, ctx.policy, endpoint._id, { events: ['email.bounced'] }, new Date(), ctx.endings);
  ctx.receiver.answer = () => ({ status: 200 });
  // Either the delivery ends or it is retried: wait for one or the other.
  await waitUntil(async () => (await delivery())!.attemptLogs.length >= 2, 'the pending email.sent delivery was settled', 12_000);
  const ended = (await delivery())!;
  assert.equal(ended.attemptLogs.map((l) => [l.httpStatus, l.errorCode]), [[500, 'http_error'], [null, 'endpoint_unsubscribed']],
    'ended without a request, not retried');
  assert.equal([ended.status, ended.nextAttemptAt], ['failed', null]);
  assert.is(sentTo(ctx, emailId), 1, 'no email.sent event was posted again to an endpoint that no longer subscribes to email.sent');
  await waitUntil(async () => await unsubscribedCounted(ctx) - countedBefore === 1, 'the ending was counted on /metrics', 5_000);

  // Subscribed again: a new email's email.sent reaches the endpoint, the ended delivery stays ended.
  await updateEndpoint(ctx.t.stores.documents, ctx.policy, endpoint._id, { events: ['email.sent', 'email.bounced'] }, new Date(), ctx.endings);
  const later = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'later', text: 'hi' });
  await waitUntil(() => sentTo(ctx, later) === 1, 'the new email\'s email.sent reached the endpoint subscribed again', 15_000);
  assert.is(sentTo(ctx, emailId), 1, 'the ended delivery was not sent again');
  assert.is((await delivery())!.status, 'failed');
});

app.run();

interface StoreContext { dir: string; documents: SqliteDocumentStore; secrets: SecretBox }
const store = suite<StoreContext>('webhooks: a delivery in flight when its event type is taken out of the endpoint\'s events');

store.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-unsubscribe-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
});
store.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

store('it ends once its outcome (500) is recorded, instead of being retried', async (ctx) => {
  const now = new Date().toISOString();
  await endpointsOf(ctx.documents).insert({
    _id: 'whe_1', workspaceId: 'ws_1', projectId: 'prj_1', url: 'https://hooks.example/', events: ['email.sent', 'email.bounced'], description: null, enabled: true,
    secretSealed: ctx.secrets.seal('whsec_test', 'webhook-signing-secret'), createdAt: now, updatedAt: now,
  });
  await deliveriesOf(ctx.documents).insert({
    _id: 'whd_flying', emailId: 'em_1', projectId: 'prj_1', endpointId: 'whe_1', eventId: 'evt_1_sent', type: 'email.sent', body: '{}',
    status: 'pending', attempts: 0, nextAttemptAt: now, attemptLogs: [], createdAt: now, updatedAt: now,
  } satisfies WebhookDelivery);
  const answer = deferred<AttemptResult>();
  let posted = 0;
  const results: Array<string | null> = [];
  const attempt = attemptWebhookDelivery({
    documents: ctx.documents, secrets: ctx.secrets, now: () => new Date(), dnsServers: [], allow: new Set(), policy: WEBHOOK_POLICY,
    egress: { post: () => (posted++, answer.promise), checkDestination: async () => ({ ok: true }) },
    onResult: (_status, errorCode) => results.push(errorCode),
  }, (await deliveriesOf(ctx.documents).get('whd_flying'))!);
  await waitUntil(() => posted === 1, 'the request is in flight', 5_000);

  const endings = new DeliveryEndings({ documents: ctx.documents, now: () => new Date(), onError: (e) => { throw e; } });
  await updateEndpoint(ctx.documents, { dnsServers: [], allow: new Set() }, 'whe_1', { events: ['email.bounced'] }, new Date(), endings);
  answer.resolve({ httpStatus: 500, errorCode: 'http_error', durationMs: 5, responseSnippet: null });
  await attempt;
  await endings.stop();
  const flown = (await deliveriesOf(ctx.documents).get('whd_flying'))!;
  assert.equal([flown.status, flown.nextAttemptAt], ['failed', null]);
  assert.equal(flown.attemptLogs.map((l) => [l.number, l.errorCode]), [[1, 'http_error'], [1, 'endpoint_unsubscribed']]);
  assert.equal(results, ['http_error', 'endpoint_unsubscribed'], 'each counted');
  assert.is(posted, 1);
});

store.run();
