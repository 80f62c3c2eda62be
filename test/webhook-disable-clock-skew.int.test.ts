// A delivery made before its endpoint is disabled ends without a request, also once the
// endpoint is enabled again (MANAGEMENT-API.md, docs/webhooks.md), whatever the clocks of the
// process that made it (the webhooks processor) and of the one that disabled it (the API) say:
// made by a processor whose clock is 2 s ahead, 100 ms before the disable, it is stamped after
// the disable's instant, and still ends. So does one whose fan-out read the endpoint before the
// disable and inserted it after the background ending had run (the attempt ends it, on the
// endpoint enabled again); one fanned out after the re-enable is sent. On the embedded store,
// with a stand-in egress.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { attemptWebhookDelivery } from '../apps/services/webhooks/attempt.ts';
import { deliveriesOf, deliveryIdOf, fanOut } from '../apps/services/webhooks/deliveries.ts';
import { DeliveryEndings } from '../apps/services/webhooks/delivery-endings.ts';
import { endpointsOf, updateEndpoint, type EndpointPolicy, type WebhookEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import type { WebhookEvent } from '../domain/webhooks/events.ts';
import type { WebhookPost } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

interface Ctx { dir: string; documents: SqliteDocumentStore; secrets: SecretBox }
const test = suite<Ctx>('webhooks: a disable ends the deliveries made before it, whatever the clocks');

test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-disable-skew-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
});
test.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const policy: EndpointPolicy = { dnsServers: [], allow: new Set() };
const event = (id: string): WebhookEvent => ({ id, type: 'email.sent', created_at: new Date().toISOString(), data: { email_id: `em_${id}`, project_id: 'prj_1' } } as unknown as WebhookEvent);

test('a delivery made just before the disable, by a processor whose clock is 2 s ahead, is not sent once the endpoint is enabled again', async (ctx) => {
  const apiNow = new Date();
  const processorSkewMs = 2_000;
  const endpoint: WebhookEndpoint = {
    _id: 'whe_1', workspaceId: 'ws_1', projectId: 'prj_1', url: 'https://hooks.example/', events: ['email.sent'], description: null, enabled: true,
    secretSealed: ctx.secrets.seal('whsec_test', 'webhook-signing-secret'), createdAt: new Date(apiNow.getTime() - 3_600_000).toISOString(), updatedAt: apiNow.toISOString(),
  };
  await endpointsOf(ctx.documents).insert(endpoint);
  // The fan-out a minute earlier (a marker the disable must end) and the one 100 ms before the disable, both by the processor.
  await fanOut(ctx.documents, [event('evt_early')], [endpoint], new Date(apiNow.getTime() - 60_000 + processorSkewMs));
  await fanOut(ctx.documents, [event('evt_just_before')], [endpoint], new Date(apiNow.getTime() - 100 + processorSkewMs));
  const early = deliveryIdOf('evt_early', 'whe_1');
  const justBefore = deliveryIdOf('evt_just_before', 'whe_1');
  // Its first attempt failed (the receiver was down: why it is being disabled); the retry is due in 5 minutes.
  const made = (await deliveriesOf(ctx.documents).get(justBefore))!;
  const { _v, ...body } = made;
  assert.ok(await deliveriesOf(ctx.documents).replace({
    ...body, attempts: 1, nextAttemptAt: new Date(apiNow.getTime() + 300_000).toISOString(),
    attemptLogs: [{ number: 1, httpStatus: 503, errorCode: 'http_error', durationMs: 5, createdAt: made.createdAt }],
  }, _v));

  // The API disables it; its background ending runs to the end.
  const endings = new DeliveryEndings({ documents: ctx.documents, now: () => apiNow, onError: (error) => { throw error; } });
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: false }, apiNow, endings);
  await endings.idle();
  assert.is((await deliveriesOf(ctx.documents).get(early))!.status, 'failed', 'the background ending ran (marker)');

  // Ten minutes later the endpoint is enabled again; the dispatcher then takes the retry, due since.
  const later = new Date(apiNow.getTime() + 600_000);
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: true }, later, endings);
  let posted = 0;
  await attemptWebhookDelivery({
    documents: ctx.documents, secrets: ctx.secrets, now: () => later, dnsServers: [], allow: new Set(), policy: WEBHOOK_POLICY,
    egress: { post: async () => (posted++, { httpStatus: 200, errorCode: null, durationMs: 1, responseSnippet: null }), checkDestination: async () => ({ ok: true }) },
  }, (await deliveriesOf(ctx.documents).get(justBefore))!);
  const d = (await deliveriesOf(ctx.documents).get(justBefore))!;
  assert.is(posted, 0, `a delivery pending at the disable was sent after the re-enable (status ${d.status}, made at ${d.createdAt}, disabled at ${apiNow.toISOString()})`);
  assert.is(d.status, 'failed');
});

test('a fan-out that read the endpoint before the disable and inserts after its background ending ran: the attempt ends it, on the endpoint enabled again; one fanned out after the re-enable is sent', async (ctx) => {
  const at = (ms: number) => new Date(Date.now() + ms);
  await endpointsOf(ctx.documents).insert({
    _id: 'whe_1', workspaceId: 'ws_1', projectId: 'prj_1', url: 'https://hooks.example/', events: ['email.sent'], description: null, enabled: true,
    secretSealed: ctx.secrets.seal('whsec_test', 'webhook-signing-secret'), createdAt: at(-3_600_000).toISOString(), updatedAt: at(-3_600_000).toISOString(),
  });
  // The processor reads the endpoint, enabled; then the API disables it and its background ending
  // runs to the end, before the processor's insert.
  const readBeforeDisable = (await endpointsOf(ctx.documents).get('whe_1'))!;
  const endings = new DeliveryEndings({ documents: ctx.documents, now: () => at(0), onError: (error) => { throw error; } });
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: false }, at(0), endings);
  await endings.idle();
  assert.is(await fanOut(ctx.documents, [event('evt_raced')], [readBeforeDisable], at(10)), 1);
  assert.is((await deliveriesOf(ctx.documents).get(deliveryIdOf('evt_raced', 'whe_1')))!.status, 'pending', 'inserted after the background ending');

  // Enabled again; an event fanned out to the endpoint as it is now.
  await updateEndpoint(ctx.documents, policy, 'whe_1', { enabled: true }, at(20), endings);
  assert.is(await fanOut(ctx.documents, [event('evt_after')], [(await endpointsOf(ctx.documents).get('whe_1'))!], at(30)), 1);

  const posted: string[] = [];
  const deps = {
    documents: ctx.documents, secrets: ctx.secrets, now: () => at(40), dnsServers: [], allow: new Set<string>(), policy: WEBHOOK_POLICY,
    egress: { post: async (post: WebhookPost) => (posted.push(post.headers['relay-event-id']), { httpStatus: 200, errorCode: null, durationMs: 1, responseSnippet: null }), checkDestination: async () => ({ ok: true as const }) },
  };
  await attemptWebhookDelivery(deps, (await deliveriesOf(ctx.documents).get(deliveryIdOf('evt_after', 'whe_1')))!);
  await attemptWebhookDelivery(deps, (await deliveriesOf(ctx.documents).get(deliveryIdOf('evt_raced', 'whe_1')))!);
  assert.equal(posted, ['evt_after'], 'only the delivery fanned out after the re-enable was sent');
  const raced = (await deliveriesOf(ctx.documents).get(deliveryIdOf('evt_raced', 'whe_1')))!;
  assert.equal([raced.status, raced.nextAttemptAt, raced.attemptLogs.map((l) => [l.httpStatus, l.errorCode])], ['failed', null, [[null, 'endpoint_disabled']]]);
});

test.run();
