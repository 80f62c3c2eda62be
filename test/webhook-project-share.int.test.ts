// Isolation between projects: one project's endpoints hold at most three quarters (48) of the
// webhooks processor's 64 requests in flight while no other project has deliveries due, and a
// quarter (16) while one has, so that another project's healthy endpoint is attempted as its
// delivery falls due, however many of the first project's deliveries wait. Endpoints that fail
// after 3.5 s are under the 5 s that makes an endpoint slow (slow endpoints hold at most half:
// webhook-slow-endpoints.int.test.ts): without the project's share, 20 of them at 4 requests each
// would hold every slot. The first suite runs the whole app with its processors and a real HTTPS
// server; the second runs the processor's dispatcher on the embedded store with a stand-in egress,
// with a backlog that fits the first look at the schedule and one that does not.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Dispatcher } from '../apps/pipeline/dispatcher.ts';
import { deliveriesOf } from '../apps/services/webhooks/deliveries.ts';
import { createEndpoint, MAX_ENDPOINTS_PER_PROJECT, type EndpointPolicy } from '../apps/services/webhooks/endpoints.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import * as support from './support/webhook-dispatch.ts';
import { dueAt, OK, startWebhookDispatcher, stopAnswering } from './support/webhook-dispatch.ts';

/** The processor's requests in flight, and what a project alone may hold of them: three quarters. */
const CONCURRENCY = 64;
const PROJECT_ALONE = (CONCURRENCY * 3) / 4;
const HOST = 'hooks.relay.test';
const FAIL_AFTER_MS = 3_500;

interface AppCtx {
  ca: TestCa; dns: TestDnsServer; server: Server; port: number; timers: Set<NodeJS.Timeout>; t: TestApp; a: DeliveryTenant; b: DeliveryTenant; policy: EndpointPolicy;
  /** Requests to project A's failing endpoints not answered yet, and the most there were at once. */
  failing: { now: number; most: number };
}
const app = suite<AppCtx>('webhooks: one project\'s failing receivers and another project\'s healthy one');

app.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.timers = new Set();
  ctx.failing = { now: 0, most: 0 };
  ctx.server = createServer(ctx.ca.issue([HOST]), (req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/fast') return res.writeHead(200).end('ok');
      ctx.failing.most = Math.max(ctx.failing.most, ++ctx.failing.now);
      const timer = setTimeout(() => {
        ctx.timers.delete(timer);
        ctx.failing.now--;
        res.writeHead(500).end('nope');
      }, FAIL_AFTER_MS);
      ctx.timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.port = (ctx.server.address() as { port: number }).port;
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.port}` }, { processors: true });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
  ctx.policy = { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow };
});
app.after(async (ctx) => {
  await ctx.t.close();
  for (const timer of ctx.timers) clearTimeout(timer);
  ctx.server.closeAllConnections();
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
  await ctx.dns.close();
  ctx.ca.remove();
});

const endpointFor = (ctx: AppCtx, tenant: DeliveryTenant, path: string) => createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, ctx.policy,
  { workspaceId: tenant.workspaceId, projectId: tenant.projectId, url: `https://${HOST}:${ctx.port}${path}`, events: ['email.sent'] }, new Date());

app('project B\'s healthy endpoint is attempted promptly while project A\'s 20 failing endpoints have a backlog', async (ctx) => {
  for (let i = 0; i < MAX_ENDPOINTS_PER_PROJECT; i++) await endpointFor(ctx, ctx.a, `/fail${i}`);
  const { endpoint: fast } = await endpointFor(ctx, ctx.b, '/fast');
  for (let i = 0; i < 5; i++) await send(ctx.t, ctx.a.key, { from: `hello@${ctx.a.domain}`, to: 'ann@example.org', subject: `a${i}`, text: 'hi' });
  const documents = ctx.t.stores.documents;
  await waitUntil(async () => (await deliveriesOf(documents).count({ projectId: ctx.a.projectId })) === 100, 'project A\'s 100 deliveries were made', 10_000);

  await send(ctx.t, ctx.b.key, { from: `hello@${ctx.b.domain}`, to: 'bob@example.org', subject: 'b', text: 'hi' });
  const bDelivery = async () => (await deliveriesOf(documents).find({ where: { endpointId: fast._id } }))[0];
  await waitUntil(async () => (await bDelivery())?.status === 'succeeded', 'project B\'s delivery succeeded', 14_000);
  const done = (await bDelivery())!;
  const waited = Date.parse(done.attemptLogs[0].createdAt) - Date.parse(done.createdAt);
  assert.ok(waited < 1_500, `project B's delivery was due at ${done.createdAt} but first attempted ${waited} ms later, behind project A's failing receivers`);
  assert.ok(ctx.failing.most <= PROJECT_ALONE, `project A held ${ctx.failing.most} requests at once, more than three quarters`);
});

app.run();

interface StoreCtx {
  dir: string;
  documents: SqliteDocumentStore;
  secrets: SecretBox;
  /** Project A's requests, answered when resolved. */
  held: Array<Deferred<AttemptResult>>;
  /** Requests made to project A's endpoints, and the most unanswered at once. */
  a: { posted: number; most: number };
  errors: Error[];
}
const store = suite<StoreCtx>('webhooks dispatcher: a project\'s endpoints leave a quarter of the requests in flight to others');

store.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-project-share-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
  ctx.held = [];
  ctx.a = { posted: 0, most: 0 };
  ctx.errors = [];
});
store.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** The processor's dispatcher; requests to project A's endpoints (`a-…`) hang until the test answers them, project B's succeed. */
function startWebhooks(ctx: StoreCtx): Promise<Dispatcher> {
  return startWebhookDispatcher({
    documents: ctx.documents, secrets: ctx.secrets, errors: ctx.errors,
    post: (post) => {
      if (!new URL(String(post.url)).hostname.startsWith('a-')) return Promise.resolve(OK);
      ctx.a.posted++;
      const answer = deferred<AttemptResult>();
      ctx.held.push(answer);
      ctx.a.most = Math.max(ctx.a.most, ctx.held.length);
      return answer.promise;
    },
  });
}

/** Project A's 20 endpoints, `each` deliveries due per endpoint, all before project B's one delivery. */
async function backlog(ctx: StoreCtx, each: number): Promise<void> {
  const ids = Array.from({ length: MAX_ENDPOINTS_PER_PROJECT }, (_, e) => `a-ep${String(e).padStart(2, '0')}`);
  for (const id of ids) await support.addEndpoint(ctx.documents, ctx.secrets, id, 'prj_a');
  for (let i = 0; i < each; i++) {
    for (const [e, id] of ids.entries()) await support.addDelivery(ctx.documents, `whd_${id}_${String(i).padStart(3, '0')}`, id, 'prj_a', dueAt(i * ids.length + e));
  }
  await support.addEndpoint(ctx.documents, ctx.secrets, 'b-fast', 'prj_b');
  await support.addDelivery(ctx.documents, 'whd_b', 'b-fast', 'prj_b', dueAt(each * ids.length + 1_000));
}

async function projectBServed(ctx: StoreCtx): Promise<void> {
  const dispatcher = await startWebhooks(ctx);
  try {
    await waitUntil(async () => (await deliveriesOf(ctx.documents).get('whd_b'))?.status === 'succeeded', 'project B\'s delivery succeeded', 5_000);
    // With B's delivery done, project A is alone again and takes three quarters, never more.
    await waitUntil(() => ctx.held.length === PROJECT_ALONE, 'project A holds three quarters of the requests in flight', 5_000);
    // B's came and went: as project A's requests end, others of its start, never more than three quarters at once.
    for (const answer of ctx.held.splice(0, 8)) answer.resolve({ httpStatus: 500, errorCode: 'http_error', durationMs: 5, responseSnippet: null });
    await waitUntil(() => ctx.a.posted === PROJECT_ALONE + 8, 'project A\'s next deliveries started', 5_000);
    assert.is(ctx.held.length, PROJECT_ALONE);
    assert.is(ctx.a.most, PROJECT_ALONE, 'never more than three quarters');
  } finally {
    await stopAnswering(dispatcher, ctx.held);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
}

store('100 deliveries of project A due first (within the first look at the schedule): project B\'s is made at once', async (ctx) => {
  await backlog(ctx, 5);
  await projectBServed(ctx);
});

store('600 deliveries of project A due first (more than the first look reads): project B\'s is still made at once', async (ctx) => {
  await backlog(ctx, 30);
  await projectBServed(ctx);
});

store.run();
