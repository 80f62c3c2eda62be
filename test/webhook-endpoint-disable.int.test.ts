// Disabling (PATCH enabled:false) or deleting a webhook endpoint ends its pending deliveries
// shortly after the answer, in the background, with endpoint_disabled / endpoint_deleted in their
// attempt log (MANAGEMENT-API.md), not when each next falls due: so an endpoint enabled again
// before then does not get them. A delivery whose request is in flight at that moment is left to
// its attempt, which ends it once it recorded the outcome. The first suite runs the whole app with
// its processors and a real HTTPS receiver; the second runs one attempt on the embedded store with
// a stand-in egress. Backlogs larger than one batch, through the HTTP API:
// webhook-endpoint-backlog.int.test.ts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { attemptWebhookDelivery } from '../apps/services/webhooks/attempt.ts';
import { deliveriesOf, type WebhookDelivery } from '../apps/services/webhooks/deliveries.ts';
import { DeliveryEndings } from '../apps/services/webhooks/delivery-endings.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { createEndpoint, deleteEndpoint, endpointsOf, updateEndpoint, type EndpointPolicy } from '../apps/services/webhooks/endpoints.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';

/** The first retry comes 3 s after the first attempt. */
const SCALE = 0.05;
const HOST = 'hooks.relay.test';

interface AppContext { ca: TestCa; dns: TestDnsServer; receiver: HttpsReceiver; t: TestApp; tenant: DeliveryTenant; policy: EndpointPolicy; endings: DeliveryEndings }

/** What the routes end pending deliveries with; a failed run fails the test. */
const endingsOn = (documents: DocumentStore) => new DeliveryEndings({
  documents, now: () => new Date(), onError: (error) => { throw error; },
});
const app = suite<AppContext>('webhooks: disabling or deleting an endpoint ends its pending deliveries');

app.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.t = await startTestApp({
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}`,
    RELAY_WEBHOOK_RETRY_SCALE: String(SCALE),
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.policy = { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow };
  ctx.endings = endingsOn(ctx.t.stores.documents);
});
app.after(async (ctx) => {
  await ctx.endings.stop();
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

async function newEndpoint(ctx: AppContext, path: string) {
  return (await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, ctx.policy,
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url: `https://${HOST}:${ctx.receiver.port}${path}`, events: ['email.sent'] }, new Date())).endpoint;
}

/** An email whose delivery to `endpointId` had its first attempt fail (the receiver answers 500 on `path`): that delivery, pending its retry. */
async function failedOnce(ctx: AppContext, endpointId: string, subject: string) {
  const emailId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject, text: 'hi' });
  const delivery = async () => (await deliveriesOf(ctx.t.stores.documents).find({ where: { emailId, endpointId } }))[0];
  await waitUntil(async () => (await delivery())?.attemptLogs.length === 1, `the first attempt of ${subject} failed (500)`, 15_000);
  const pending = (await delivery())!;
  assert.is(pending.status, 'pending');
  return { emailId, delivery, retryAt: Date.parse(pending.nextAttemptAt!) };
}

const emailIdOf = (body: string): string => JSON.parse(body).data.email_id;

app('disabled: its pending delivery ends shortly after (endpoint_disabled); enabled again, the endpoint gets new events but never that delivery', async (ctx) => {
  const endpoint = await newEndpoint(ctx, '/disable');
  ctx.receiver.answer = (r) => ({ status: r.path === '/disable' ? 500 : 200 });
  const { emailId, delivery, retryAt } = await failedOnce(ctx, endpoint._id, 'disable');

  // PATCH {enabled: false} (the route calls exactly this).
  await updateEndpoint(ctx.t.stores.documents, ctx.policy, endpoint._id, { enabled: false }, new Date(), ctx.endings);
  await waitUntil(async () => (await delivery())!.status === 'failed', 'the disable ended the pending delivery', 10_000);
  const ended = (await delivery())!;
  assert.equal([ended.status, ended.nextAttemptAt], ['failed', null]);
  assert.equal(ended.attemptLogs.map((l) => l.errorCode), ['http_error', 'endpoint_disabled']);
  assert.ok(Date.parse(ended.attemptLogs[1].createdAt) < retryAt, 'ended by the disable, before its retry was due');

  // PATCH {enabled: true} before the retry was due; then, once it would have been, a new email:
  // its delivery is made, and the ended one is not (it was due first).
  await updateEndpoint(ctx.t.stores.documents, ctx.policy, endpoint._id, { enabled: true }, new Date(), ctx.endings);
  ctx.receiver.answer = () => ({ status: 200 });
  await waitUntil(() => Date.now() > retryAt, 'the ended delivery\'s retry would have been due', 10_000);
  const later = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'after', text: 'hi' });
  await waitUntil(() => ctx.receiver.requests.some((r) => r.path === '/disable' && emailIdOf(r.body) === later), 'the new email\'s event reached the endpoint enabled again', 15_000);
  assert.is(ctx.receiver.requests.filter((r) => r.path === '/disable' && emailIdOf(r.body) === emailId).length, 1, 'the ended delivery was attempted once, before the disable');
  assert.is((await delivery())!.status, 'failed');
});

app('deleted: its pending delivery ends shortly after (endpoint_deleted)', async (ctx) => {
  const endpoint = await newEndpoint(ctx, '/delete');
  ctx.receiver.answer = (r) => ({ status: r.path === '/delete' ? 500 : 200 });
  const { delivery, retryAt } = await failedOnce(ctx, endpoint._id, 'delete');
  // DELETE (the route calls exactly this).
  await deleteEndpoint(ctx.t.stores.documents, endpoint._id, ctx.endings);
  await waitUntil(async () => (await delivery())!.status === 'failed', 'the deletion ended the pending delivery', 10_000);
  const ended = (await delivery())!;
  assert.equal([ended.status, ended.nextAttemptAt], ['failed', null]);
  assert.equal(ended.attemptLogs.map((l) => l.errorCode), ['http_error', 'endpoint_deleted']);
  assert.ok(Date.parse(ended.attemptLogs[1].createdAt) < retryAt, 'ended by the deletion, before its retry was due');
});

app.run();

interface StoreContext { dir: string; documents: SqliteDocumentStore; secrets: SecretBox }
const store = suite<StoreContext>('webhooks: a delivery in flight when its endpoint is disabled or deleted');

store.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-disable-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
});
store.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const NOW = new Date();
const policy: EndpointPolicy = { dnsServers: [], allow: new Set() };

async function seed(ctx: StoreContext, deliveries: string[]): Promise<void> {
  await endpointsOf(ctx.documents).insert({
    _id: 'whe_1', workspaceId: 'ws_1', projectId: 'prj_1', url: 'https://hooks.example/', events: ['email.sent'], description: null, enabled: true,
    secretSealed: ctx.secrets.seal('whsec_test', 'webhook-signing-secret'), createdAt: NOW.toISOString(), updatedAt: NOW.toISOString(),
  });
  for (const id of deliveries) {
    await deliveriesOf(ctx.documents).insert({
      _id: id, emailId: `em_${id}`, projectId: 'prj_1', endpointId: 'whe_1', eventId: `evt_${id}`, type: 'email.sent', body: '{}',
      status: 'pending', attempts: 0, nextAttemptAt: NOW.toISOString(), attemptLogs: [], createdAt: NOW.toISOString(), updatedAt: NOW.toISOString(),
    } satisfies WebhookDelivery);
  }
}

store('the disable ends the others and leaves the one in flight to its attempt, which ends it once its outcome (500) is recorded', async (ctx) => {
  await seed(ctx, ['whd_flying', 'whd_waiting']);
  const answer = deferred<AttemptResult>();
  let posted = 0;
  const attempt = attemptWebhookDelivery({
    documents: ctx.documents, secrets: ctx.secrets, now: () => new Date(), dnsServers: [], allow: new Set(), policy: WEBHOOK_POLICY,
    egress: { post: () => (posted++, answer.promise), checkDestination: async () => ({ ok: true }) },
  }, (await deliveriesOf(ctx.documents).get('whd_flying'))!);
  await waitUntil(() => posted === 1, 'the request is in flight', 5_000);

  const endings = endingsOn(ctx.documents);
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: false }, new Date(), endings);
  await endings.idle();
  assert.is((await deliveriesOf(ctx.documents).get('whd_waiting'))!.status, 'failed', 'the one not in flight ended');
  assert.is((await deliveriesOf(ctx.documents).get('whd_flying'))!.status, 'pending', 'the one in flight is its attempt\'s');
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: false }, new Date(), endings);
  await endings.idle();
  assert.is((await deliveriesOf(ctx.documents).get('whd_flying'))!.status, 'pending', 'and stays so');

  answer.resolve({ httpStatus: 500, errorCode: 'http_error', durationMs: 5, responseSnippet: null });
  await attempt;
  const flown = (await deliveriesOf(ctx.documents).get('whd_flying'))!;
  assert.equal([flown.status, flown.nextAttemptAt], ['failed', null]);
  assert.equal(flown.attemptLogs.map((l) => [l.number, l.errorCode]), [[1, 'http_error'], [1, 'endpoint_disabled']]);
});

store('a delivery in flight that succeeds stays succeeded', async (ctx) => {
  await seed(ctx, ['whd_flying']);
  const answer = deferred<AttemptResult>();
  const attempt = attemptWebhookDelivery({
    documents: ctx.documents, secrets: ctx.secrets, now: () => new Date(), dnsServers: [], allow: new Set(), policy: WEBHOOK_POLICY,
    egress: { post: () => answer.promise, checkDestination: async () => ({ ok: true }) },
  }, (await deliveriesOf(ctx.documents).get('whd_flying'))!);
  await waitUntil(async () => (await deliveriesOf(ctx.documents).get('whd_flying'))!.attempts === 1, 'the attempt is taken', 5_000);
  const endings = endingsOn(ctx.documents);
  await deleteEndpoint(ctx.documents, 'whe_1', endings);
  await endings.idle();
  answer.resolve({ httpStatus: 200, errorCode: null, durationMs: 5, responseSnippet: null });
  await attempt;
  const flown = (await deliveriesOf(ctx.documents).get('whd_flying'))!;
  assert.equal([flown.status, flown.attemptLogs.map((l) => l.errorCode)], ['succeeded', [null]]);
});

store.run();
