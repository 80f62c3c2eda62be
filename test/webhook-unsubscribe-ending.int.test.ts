// Taking an event type out of an endpoint's events (PATCH /v1/webhook-endpoints/:id) ends its
// pending deliveries of that type shortly after the answer, in the background as a disable does,
// not when each next falls due (a minute later here, at the unscaled schedule; hours later further
// into it): the endpoint's delivery list shows them ended with endpoint_unsubscribed and /metrics
// counts them, while a pending delivery of a type still subscribed to stays pending. The whole app
// runs with its processors, a real HTTPS receiver that fails every request, and the session API.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { addSuppression } from '../apps/services/management/suppressions.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';

const HOST = 'hooks.relay.test';

interface Ctx { ca: TestCa; dns: TestDnsServer; receiver: HttpsReceiver; t: TestApp; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('webhooks: an event type taken out of an endpoint\'s events ends its pending deliveries of that type at once');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.receiver.answer = () => ({ status: 500 });
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  // No RELAY_WEBHOOK_RETRY_SCALE: the first retry is due a minute after the first attempt.
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}` }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@unsubscribe.test');
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

interface DeliveryView { id: string; emailId: string; type: string; status: string; nextAttemptAt: string | null; attemptLogs: Array<{ httpStatus: number | null; errorCode: string | null; createdAt: string }> }

async function deliveriesOf(ctx: Ctx, endpointId: string): Promise<DeliveryView[]> {
  const page = await call(ctx.t, 'GET', `/v1/webhook-endpoints/${endpointId}/deliveries`, { as: ctx.owner });
  assert.is(page.statusCode, 200, page.body);
  return page.json().deliveries;
}

async function unsubscribedCounted(ctx: Ctx): Promise<number> {
  const page = await ctx.t.app.inject({ method: 'GET', url: '/metrics' });
  return samplesOf(parseMetrics(page.body), 'relay_webhook_attempts_total', { result: 'endpoint_unsubscribed' }).reduce((sum, s) => sum + s.value, 0);
}

test('PATCH events without email.sent: its pending email.sent delivery ends without waiting for its retry; the email.suppressed one stays pending', async (ctx) => {
  const created = await call(ctx.t, 'POST', `/v1/projects/${ctx.tenant.projectId}/webhook-endpoints`, {
    as: ctx.owner, body: { url: `https://${HOST}:${ctx.receiver.port}/h`, events: ['email.sent', 'email.suppressed'] },
  });
  assert.is(created.statusCode, 201, created.body);
  const endpointId = created.json().id as string;

  await addSuppression(ctx.t.stores, ctx.tenant.workspaceId, 'blocked@example.org', new Date(), { kind: 'user', userId: ctx.owner.userId });
  const sentId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'sent', text: 'hi' });
  const suppressedId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'blocked@example.org', subject: 'suppressed', text: 'hi' });
  const byEmail = (list: DeliveryView[], emailId: string) => list.find((d) => d.emailId === emailId);
  await waitUntil(async () => {
    const list = await deliveriesOf(ctx, endpointId);
    return byEmail(list, sentId)?.attemptLogs.length === 1 && byEmail(list, suppressedId)?.attemptLogs.length === 1;
  }, 'the first attempt of each delivery failed (500)', 20_000);
  const before = await deliveriesOf(ctx, endpointId);
  const sent = byEmail(before, sentId)!;
  const suppressed = byEmail(before, suppressedId)!;
  assert.equal([sent.type, sent.status, suppressed.type, suppressed.status], ['email.sent', 'pending', 'email.suppressed', 'pending']);
  const retryAt = Date.parse(sent.nextAttemptAt!);
  assert.ok(retryAt - Date.now() > 30_000, 'its retry is far off');
  const countedBefore = await unsubscribedCounted(ctx);

  const patched = await call(ctx.t, 'PATCH', `/v1/webhook-endpoints/${endpointId}`, { as: ctx.owner, body: { events: ['email.suppressed'] } });
  assert.is(patched.statusCode, 200, patched.body);
  assert.equal(patched.json().events, ['email.suppressed']);

  // Well before the retry falls due: only the background ending can have ended it by then.
  await waitUntil(async () => byEmail(await deliveriesOf(ctx, endpointId), sentId)!.status !== 'pending', 'the email.sent delivery ended', 15_000);
  const after = await deliveriesOf(ctx, endpointId);
  const ended = byEmail(after, sentId)!;
  assert.equal([ended.status, ended.nextAttemptAt], ['failed', null]);
  assert.equal(ended.attemptLogs.map((l) => [l.httpStatus, l.errorCode]), [[500, 'http_error'], [null, 'endpoint_unsubscribed']], 'ended without a request');
  assert.ok(Date.parse(ended.attemptLogs[1].createdAt) < retryAt, 'ended before its retry was due');
  await waitUntil(async () => await unsubscribedCounted(ctx) - countedBefore >= 1, 'the ending was counted on /metrics', 5_000);
  assert.is(await unsubscribedCounted(ctx) - countedBefore, 1, 'counted once');

  // The same batch read and left it: a type still subscribed to keeps its pending retry.
  const kept = byEmail(after, suppressedId)!;
  assert.equal([kept.status, kept.nextAttemptAt, kept.attemptLogs.map((l) => l.errorCode)], ['pending', suppressed.nextAttemptAt, ['http_error']]);
  const posted = (emailId: string) => ctx.receiver.requests.filter((r) => JSON.parse(r.body).data.email_id === emailId).length;
  assert.equal([posted(sentId), posted(suppressedId)], [1, 1]);
});

test.run();
