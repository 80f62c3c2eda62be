// Disabling or deleting a webhook endpoint that holds a backlog of pending deliveries many times
// the size of one batch, through the HTTP API: the PATCH / DELETE is answered as soon as the
// endpoint's change is durable, while its deliveries are still pending; other requests are
// answered while they are being ended; every one of them then ends with the change's reason.
// Enabled again meanwhile, the endpoint still does not get them, but does get what is made after.
// A store failing midway is logged and the process goes on answering. Closing the API leaves off
// without touching the closed stores, and what it did not reach ends through attempts (the
// webhooks processor of the next process), also once the endpoint is enabled again.
//
// The API is built here as test/support/app.ts builds it, with a logger this test reads (the
// background errors are only visible there) and a document store that can be made to fail.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { ApiContext } from '../apps/api/context.ts';
import { buildApi } from '../apps/api/server.ts';
import { createRelayMetrics } from '../apps/relay-metrics.ts';
import { openServices, openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { deliveriesOf, deliveryIdOf, END_BATCH, fanOut, type WebhookDelivery } from '../apps/services/webhooks/deliveries.ts';
import { endpointsOf } from '../apps/services/webhooks/endpoints.ts';
import type { WebhookEvent } from '../domain/webhooks/events.ts';
import { loadConfig } from '../infra/config.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { createTestClock, startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { addDelivery, dueAt } from './support/webhook-dispatch.ts';

/** Twelve and a half batches: the last one holds the last END_BATCH / 2 of them and whatever sorts after. */
const BACKLOG = END_BATCH * 12 + END_BATCH / 2;
const HOST = 'hooks.example.com';

interface LogLine { level: number; msg: string; endpointId?: string }

interface Api extends TestApp {
  logs: LogLine[];
  /** Makes every write to a webhook delivery fail (a full disk, a store that went away). */
  failDeliveryWrites: boolean;
  /** The second half of close(): services and stores, once the HTTP side (app.close()) is done. */
  closeStores(): Promise<void>;
}

/** Every write to the webhook deliveries fails while `api.failDeliveryWrites` is set. */
function failing(documents: DocumentStore, api: () => Api): DocumentStore {
  const bound = <T extends object>(target: T, name: string | symbol) => {
    const value = Reflect.get(target, name, target);
    return typeof value === 'function' ? value.bind(target) : value;
  };
  return new Proxy(documents, {
    get(target, name) {
      if (name !== 'collection') return bound(target, name);
      return (collectionName: string) => {
        const collection = target.collection(collectionName) as Collection<{ _id: string }>;
        if (collectionName !== COLLECTIONS.webhookDeliveries) return collection;
        return new Proxy(collection, {
          get(inner, method) {
            if ((method === 'replace' || method === 'insert') && api().failDeliveryWrites) return async () => { throw new Error('the disk is full (test)'); };
            return bound(inner, method);
          },
        });
      };
    },
  });
}

/** The API over the embedded stores of `dataDir`, as a process runs it, logging into `logs`. */
async function startApi(dataDir: string, dnsServer: string): Promise<Api> {
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', RELAY_DNS_SERVERS: dnsServer });
  const stores = await openStores(config);
  await prepareStores(stores.documents);
  const services = await openServices(config, stores);
  const clock = createTestClock();
  const logs: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const ctx: ApiContext = {
    config, events: stores.events, documents: failing(stores.documents, () => api), services, now: () => clock.now(),
    readiness: async () => ({ checks: {}, parts: {} }), metrics: createRelayMetrics(),
  };
  const app = await buildApi(ctx, { logger });
  await app.ready();
  const closeStores = async () => {
    await services.close();
    await stores.close();
  };
  const api: Api = {
    app, ctx, stores, config, clock, url: null, logs, failDeliveryWrites: false, closeStores,
    async close() {
      await app.close();
      await closeStores();
    },
  };
  return api;
}

const pendingOf = (api: TestApp, endpointId: string) => deliveriesOf(api.stores.documents).count({ endpointId, status: 'pending' });

/** An endpoint made through the API, with BACKLOG deliveries pending (due a minute ago, made then), as one down for a while has. */
async function endpointWithBacklog(api: TestApp, owner: Caller, projectId: string, name: string): Promise<{ id: string; deliveryIds: string[] }> {
  const created = await call(api, 'POST', `/v1/projects/${projectId}/webhook-endpoints`, { as: owner, body: { url: `https://${HOST}/${name}`, events: ['email.sent'] } });
  assert.is(created.statusCode, 201, created.body);
  const id = created.json().id as string;
  const deliveryIds = Array.from({ length: BACKLOG }, (_, i) => `whd_${name}_${String(i).padStart(5, '0')}`);
  // Side by side, so that they share commits.
  for (let i = 0; i < deliveryIds.length; i += 250) {
    await Promise.all(deliveryIds.slice(i, i + 250).map((deliveryId, j) => addDelivery(api.stores.documents, deliveryId, id, projectId, dueAt(i + j))));
  }
  assert.is(await pendingOf(api, id), BACKLOG);
  return { id, deliveryIds };
}

/** Every one of `ids` ended without a request, with `reason` in its one attempt log. */
async function assertEnded(api: TestApp, ids: string[], reason: 'endpoint_disabled' | 'endpoint_deleted'): Promise<void> {
  const found = await deliveriesOf(api.stores.documents).find({ where: { _id: { in: ids } }, limit: ids.length });
  assert.is(found.length, ids.length);
  const wrong = found.filter((d: WebhookDelivery) => d.status !== 'failed' || d.nextAttemptAt !== null || d.attemptLogs.length !== 1
    || d.attemptLogs[0].errorCode !== reason || d.attemptLogs[0].httpStatus !== null);
  assert.equal(wrong.map((d) => [d._id, d.status, d.attemptLogs]).slice(0, 3), [], `every delivery ended with ${reason}`);
}

async function attemptsCounted(api: TestApp, result: string): Promise<number> {
  const page = await api.app.inject({ method: 'GET', url: '/metrics' });
  return samplesOf(parseMetrics(page.body), 'relay_webhook_attempts_total', { result }).reduce((sum, s) => sum + s.value, 0);
}

interface Context { dir: string; dns: TestDnsServer; api: Api; owner: Caller; projectId: string }

const test = suite<Context>('webhook endpoints: a backlog of pending deliveries ends after the answer, in the background');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-backlog-'));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '8.8.8.8' }]);
  ctx.api = await startApi(ctx.dir, ctx.dns.address);
  ctx.owner = await newCaller(ctx.api, 'owner@backlog.test');
  ctx.projectId = (await workspaceWithProject(ctx.api, ctx.owner)).projectId;
});

test.after(async (ctx) => {
  await ctx.api.close();
  await ctx.dns.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('PATCH enabled:false is answered while the deliveries are still pending; then every one ends (endpoint_disabled), counted on /metrics', async (ctx) => {
  const { id, deliveryIds } = await endpointWithBacklog(ctx.api, ctx.owner, ctx.projectId, 'disabled');
  const countedBefore = await attemptsCounted(ctx.api, 'endpoint_disabled');
  const patched = await call(ctx.api, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: false } });
  const pendingAtAnswer = await pendingOf(ctx.api, id);
  assert.is(patched.statusCode, 200, patched.body);
  assert.is(patched.json().enabled, false);
  assert.ok(pendingAtAnswer > 0, `answered before the backlog was ended (${pendingAtAnswer} of ${BACKLOG} still pending)`);
  assert.is((await call(ctx.api, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.owner })).json().enabled, false, 'the change itself is there at the answer');

  await waitUntil(async () => await pendingOf(ctx.api, id) === 0, 'every pending delivery of the disabled endpoint ended', 30_000);
  await assertEnded(ctx.api, deliveryIds, 'endpoint_disabled');
  // Counted once each batch's writes have settled, a moment after they show.
  await waitUntil(async () => await attemptsCounted(ctx.api, 'endpoint_disabled') - countedBefore >= BACKLOG, 'the ended deliveries were counted', 10_000);
  assert.is(await attemptsCounted(ctx.api, 'endpoint_disabled') - countedBefore, BACKLOG, 'each counted once, as an attempt finding the endpoint disabled is');
  assert.equal(ctx.api.logs.filter((l) => l.level >= 50), []);
});

test('DELETE is answered while the deliveries are still pending; then every one ends (endpoint_deleted)', async (ctx) => {
  const { id, deliveryIds } = await endpointWithBacklog(ctx.api, ctx.owner, ctx.projectId, 'deleted');
  const deleted = await call(ctx.api, 'DELETE', `/v1/webhook-endpoints/${id}`, { as: ctx.owner });
  const pendingAtAnswer = await pendingOf(ctx.api, id);
  assert.is(deleted.statusCode, 200, deleted.body);
  assert.is(deleted.json().deleted, true);
  assert.ok(pendingAtAnswer > 0, `answered before the backlog was ended (${pendingAtAnswer} of ${BACKLOG} still pending)`);
  assert.is((await call(ctx.api, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.owner })).statusCode, 404, 'the endpoint is gone at the answer');

  await waitUntil(async () => await pendingOf(ctx.api, id) === 0, 'every pending delivery of the deleted endpoint ended', 30_000);
  await assertEnded(ctx.api, deliveryIds, 'endpoint_deleted');
  assert.equal(ctx.api.logs.filter((l) => l.level >= 50), []);
});

test('/healthz and another read are answered while the backlog is being ended', async (ctx) => {
  const { id } = await endpointWithBacklog(ctx.api, ctx.owner, ctx.projectId, 'healthz');
  const patched = await call(ctx.api, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: false } });
  assert.is(patched.statusCode, 200, patched.body);
  const health = await ctx.api.app.inject({ method: 'GET', url: '/healthz' });
  const pendingAtHealth = await pendingOf(ctx.api, id);
  assert.is(health.statusCode, 200);
  assert.ok(pendingAtHealth > 0, `/healthz answered before the backlog was ended (${pendingAtHealth} still pending)`);
  const list = await call(ctx.api, 'GET', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.owner });
  const pendingAtList = await pendingOf(ctx.api, id);
  assert.is(list.statusCode, 200);
  assert.ok(pendingAtList > 0, `the endpoint list answered before the backlog was ended (${pendingAtList} still pending)`);
  await waitUntil(async () => await pendingOf(ctx.api, id) === 0, 'the backlog ended', 30_000);
});

test('enabled again while its backlog is being ended: the backlog still ends, a delivery fanned out to it after the enable does not', async (ctx) => {
  const { id, deliveryIds } = await endpointWithBacklog(ctx.api, ctx.owner, ctx.projectId, 'reenabled');
  const disabled = await call(ctx.api, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: false } });
  assert.is(disabled.statusCode, 200, disabled.body);
  const enabled = await call(ctx.api, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: true } });
  assert.is(enabled.statusCode, 200, enabled.body);
  assert.is(enabled.json().enabled, true);
  // An event fanned out to the endpoint enabled again, as the webhooks processor does it (the
  // endpoint read, then the delivery inserted); due after the whole backlog, so the run reads it in
  // its last batch, with the backlog's last deliveries.
  const endpoint = (await endpointsOf(ctx.api.stores.documents).get(id))!;
  const event = {
    id: 'evt_reenabled_later', type: 'email.sent', created_at: new Date().toISOString(),
    data: { email_id: 'em_reenabled_later', project_id: ctx.projectId, test_mode: false, status: 'sent', recipients: ['ann@example.org'], provider_message_id: null },
  } satisfies WebhookEvent;
  assert.is(await fanOut(ctx.api.stores.documents, [event], [endpoint], new Date()), 1);
  const laterId = deliveryIdOf(event.id, id);
  const pendingAfterFanOut = await pendingOf(ctx.api, id);
  // More than the last batch's share of the backlog still pending: the run had not read that batch yet.
  assert.ok(pendingAfterFanOut > END_BATCH / 2 + 1, `made before the run read its last batch (${pendingAfterFanOut} still pending)`);
  await waitUntil(async () => await pendingOf(ctx.api, id) <= 1, 'the whole backlog ended', 30_000);
  await assertEnded(ctx.api, deliveryIds, 'endpoint_disabled');
  const kept = (await deliveriesOf(ctx.api.stores.documents).get(laterId))!;
  assert.equal([kept.status, kept.attemptLogs], ['pending', []], 'the delivery made after the enable is left to the endpoint');
});

test('a store failing while the backlog is being ended: logged, naming the endpoint; the process goes on answering', async (ctx) => {
  const { id } = await endpointWithBacklog(ctx.api, ctx.owner, ctx.projectId, 'failing');
  ctx.api.failDeliveryWrites = true;
  try {
    const patched = await call(ctx.api, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: ctx.owner, body: { enabled: false } });
    assert.is(patched.statusCode, 200, patched.body);
    await waitUntil(() => ctx.api.logs.some((l) => l.level >= 50 && l.endpointId === id), 'the failure was logged', 10_000);
  } finally {
    ctx.api.failDeliveryWrites = false;
  }
  const [logged] = ctx.api.logs.filter((l) => l.level >= 50);
  assert.match(logged.msg, /ending the pending deliveries/);
  assert.is((await ctx.api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  assert.is((await call(ctx.api, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.owner })).json().enabled, false);
  assert.is(await pendingOf(ctx.api, id), BACKLOG, 'nothing ended: left to the attempts, as they fall due');
  ctx.api.logs.length = 0;
});

test('routes that take no query refuse an unknown parameter (400 validation_error naming it)', async (ctx) => {
  const created = await call(ctx.api, 'POST', `/v1/projects/${ctx.projectId}/webhook-endpoints`, { as: ctx.owner, body: { url: `https://${HOST}/query`, events: ['email.sent'] } });
  assert.is(created.statusCode, 201, created.body);
  const id = created.json().id as string;
  const read = await call(ctx.api, 'GET', `/v1/webhook-endpoints/${id}?expand=secret`, { as: ctx.owner });
  assert.is(read.statusCode, 400, read.body);
  assert.is(errorCode(read), 'validation_error');
  assert.match(read.json().error.message, /query\.expand/);
  const deleted = await call(ctx.api, 'DELETE', `/v1/webhook-endpoints/${id}?force=true`, { as: ctx.owner });
  assert.is(deleted.statusCode, 400, deleted.body);
  assert.is((await call(ctx.api, 'GET', `/v1/webhook-endpoints/${id}`, { as: ctx.owner })).statusCode, 200, 'the refused DELETE deleted nothing');
});

test.run();

interface RestartContext { dir: string; dns: TestDnsServer }

const restart = suite<RestartContext>('webhook endpoints: what the background ending did not reach ends when it falls due');

restart.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-backlog-restart-'));
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '8.8.8.8' }]);
});

restart.after(async (ctx) => {
  await ctx.dns.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

restart('closed mid-backlog: the close leaves off without writing to the closed stores; the next process ends the rest through attempts, also with the endpoint enabled again', async (ctx) => {
  const first = await startApi(ctx.dir, ctx.dns.address);
  const owner = await newCaller(first, 'owner@restart.test');
  const { projectId } = await workspaceWithProject(first, owner);
  const { id, deliveryIds } = await endpointWithBacklog(first, owner, projectId, 'restart');
  const patched = await call(first, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: owner, body: { enabled: false } });
  assert.is(patched.statusCode, 200, patched.body);
  await first.app.close();
  const left = await pendingOf(first, id);
  assert.ok(left > 0, `the close came before the backlog was ended (${left} still pending)`);
  await first.closeStores();

  // The next process: the API and the webhooks processor, which ends each delivery as it falls due.
  const second = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address }, { dataDir: ctx.dir, processors: ['webhooks'] });
  try {
    const enabled = await call(second, 'PATCH', `/v1/webhook-endpoints/${id}`, { as: owner, body: { enabled: true } });
    assert.is(enabled.statusCode, 200, enabled.body);
    await waitUntil(async () => await pendingOf(second, id) === 0, 'the attempts ended what was left', 60_000);
    await assertEnded(second, deliveryIds, 'endpoint_disabled');
  } finally {
    await second.close();
  }
  // Long after the first process closed its stores (the second ended the rest meanwhile): had its
  // background ending gone on, its reads and writes would have failed and been logged.
  assert.equal(first.logs.filter((l) => l.level >= 40), [], 'nothing went wrong in the first process');
});

restart.run();
