// The webhooks processor's delivery rules against real HTTPS receivers: the retry schedule at
// the spec's relative times (scaled), giving up after seven attempts, unsafe destinations
// stopped without retries, redirects never followed but retried as failed attempts, and a slow
// endpoint that does not hold up a fast one.
import { createHmac } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { webhookResultOf } from '../apps/relay-metrics.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';

/** The schedule runs at a thousandth of the spec's: 60 ms … 86.4 s. */
const SCALE = 0.001;
const HOST = 'hooks.relay.test';
const SLOW_HOST = 'slow.relay.test';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  receiver: HttpsReceiver;
  slow: HttpsReceiver;
  t: TestApp;
  tenant: DeliveryTenant;
}

const test = suite<Context>('webhook delivery rules');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
  ctx.slow = await startHttpsReceiver(ctx.ca.issue([SLOW_HOST]));
  ctx.slow.answer = () => 'hang';
  ctx.dns = await startDnsServer([]);
  ctx.t = await startTestApp({
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port},${SLOW_HOST}:${ctx.slow.port}`,
    RELAY_WEBHOOK_RETRY_SCALE: String(SCALE),
  }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone([
    { name: HOST, type: 'A', data: '127.0.0.1' },
    { name: SLOW_HOST, type: 'A', data: '127.0.0.1' },
    // Global at creation; the test turns it into loopback before delivery.
    { name: 'rebind.relay.test', type: 'A', data: '8.8.8.8' },
  ]);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.receiver.close();
  await ctx.slow.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

/** Creates an endpoint; returns its id, or its signing secret when asked. */
async function endpoint(ctx: Context, url: string, secret = false): Promise<string> {
  const created = await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets,
    { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow },
    { workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url, events: ['email.sent'] }, new Date());
  return secret ? created.secret : created.endpoint._id;
}

async function disableAll(ctx: Context): Promise<void> {
  const { endpointsOf } = await import('../apps/services/webhooks/endpoints.ts');
  for (const e of await endpointsOf(ctx.t.stores.documents).find({ where: { projectId: ctx.tenant.projectId } })) await endpointsOf(ctx.t.stores.documents).delete(e._id);
}

const sendOne = (ctx: Context, subject: string) => send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject, text: 'hi' });

const deliveriesOf = async (ctx: Context, emailId: string) => (await detail(ctx.t, ctx.tenant.key, emailId)).webhookDeliveries as Array<{
  id: string; eventId: string; status: string; nextAttemptAt: string | null;
  attemptLogs: Array<{ number: number; httpStatus: number | null; errorCode: string | null; durationMs: number; createdAt: string }>;
}>;

test('500 six times then 200: seven attempts, none before the spec\'s relative times (−10 %), one event id, identical bodies; a receiver that never succeeds ends failed after the seventh', async (ctx) => {
  const secrets = new Map([
    ['/flaky', await endpoint(ctx, `https://${HOST}:${ctx.receiver.port}/flaky`, true)],
    ['/never', await endpoint(ctx, `https://${HOST}:${ctx.receiver.port}/never`, true)],
  ]);
  let flaky = 0;
  ctx.receiver.answer = (r) => (r.path === '/never' ? { status: 500 } : { status: ++flaky <= 6 ? 500 : 200 });
  const id = await sendOne(ctx, 'retries');
  await waitUntil(async () => (await deliveriesOf(ctx, id)).filter((d) => d.status !== 'pending').length === 2, 'both deliveries finished', 150_000);
  for (const path of ['/flaky', '/never']) {
    const requests = ctx.receiver.requests.filter((r) => r.path === path);
    assert.is(requests.length, 7, `${path}: seven attempts`);
    assert.is(new Set(requests.map((r) => r.headers['relay-event-id'])).size, 1, 'one event id');
    assert.is(new Set(requests.map((r) => r.body)).size, 1, 'identical bodies');
    // Signed afresh at each attempt: each signature is that of its own timestamp (attempts in
    // the same second, as the scaled schedule makes them, share both).
    for (const r of requests) assert.is(r.headers['relay-signature'], `v1=${createHmac('sha256', secrets.get(path)!).update(`${r.headers['relay-timestamp']}.${r.body}`).digest('hex')}`);
    assert.ok(new Set(requests.map((r) => r.headers['relay-timestamp'])).size >= 3, 'timestamps move with the attempts');
  }
  const deliveries = await deliveriesOf(ctx, id);
  const statuses = deliveries.map((d) => d.status).sort();
  assert.equal(statuses, ['failed', 'succeeded']);
  for (const d of deliveries) {
    assert.is(d.attemptLogs.length, 7);
    assert.equal(d.attemptLogs.map((l) => l.number), [1, 2, 3, 4, 5, 6, 7]);
    for (let n = 1; n < 7; n++) {
      // From the end of attempt n to the start of attempt n + 1.
      const ended = Date.parse(d.attemptLogs[n - 1].createdAt) + d.attemptLogs[n - 1].durationMs;
      const gap = Date.parse(d.attemptLogs[n].createdAt) - ended;
      const due = WEBHOOK_POLICY.retryDelaysMs[n - 1] * SCALE;
      // Never early (10 % at most, the spec's tolerance); late by a machine-dependent amount.
      // The schedule is scaled down to 60 ms for the first retry, where the durable writes of
      // taking and recording an attempt (an fsync each, slow on a busy disk) and the
      // dispatcher's wake-up are a fixed cost that real delays (minutes) make negligible: a
      // tighter upper bound here would measure the machine, not the schedule.
      assert.ok(gap >= due * 0.9, `attempt ${n + 1} came ${gap} ms after attempt ${n}, due ${due} ms: too early`);
      assert.ok(gap - due < 1000, `attempt ${n + 1} came ${gap} ms after attempt ${n}, due ${due} ms: not within 1 s of its due time`);
    }
    assert.is(d.nextAttemptAt, null);
  }
  const failed = deliveries.find((d) => d.status === 'failed')!;
  assert.ok(failed.attemptLogs.every((l) => l.httpStatus === 500 && l.errorCode === 'http_error'));
  await disableAll(ctx);
});

test('an unsafe destination at delivery time (the name now resolves to loopback) stops at once, without retries', async (ctx) => {
  await endpoint(ctx, 'https://rebind.relay.test/hooks');
  ctx.dns.setZone([
    { name: HOST, type: 'A', data: '127.0.0.1' },
    { name: SLOW_HOST, type: 'A', data: '127.0.0.1' },
    { name: 'rebind.relay.test', type: 'A', data: '127.0.0.1' },
  ]);
  const id = await sendOne(ctx, 'rebinding');
  // Failed is final: nothing is due for it any more (nextAttemptAt null, checked below).
  await waitUntil(async () => (await deliveriesOf(ctx, id)).some((d) => d.status === 'failed'), 'the delivery failed');
  const [delivery] = await deliveriesOf(ctx, id);
  assert.is(delivery.attemptLogs.length, 1);
  assert.is(delivery.attemptLogs[0].errorCode, 'unsafe_destination');
  assert.is(delivery.attemptLogs[0].httpStatus, null);
  assert.is(delivery.nextAttemptAt, null);
  await disableAll(ctx);
});

test('a 302 (to loopback) is never followed: a failed attempt logged with its status, retried on the schedule until the receiver answers 2xx', async (ctx) => {
  await endpoint(ctx, `https://${HOST}:${ctx.receiver.port}/moved`);
  const before = ctx.receiver.requests.length;
  let moved = 0;
  ctx.receiver.answer = (r) => (r.path === '/moved' && ++moved <= 2 ? { status: 302, headers: { location: `https://127.0.0.1:${ctx.receiver.port}/inside` } } : { status: 200 });
  const id = await sendOne(ctx, 'redirect');
  await waitUntil(async () => (await deliveriesOf(ctx, id)).some((d) => d.status === 'succeeded'), 'the delivery succeeded');
  const [delivery] = await deliveriesOf(ctx, id);
  assert.equal(delivery.attemptLogs.map((l) => [l.number, l.httpStatus, l.errorCode]), [[1, 302, 'redirect'], [2, 302, 'redirect'], [3, 200, null]]);
  const [first, second, third] = delivery.attemptLogs;
  assert.ok(Date.parse(second.createdAt) - (Date.parse(first.createdAt) + first.durationMs) >= WEBHOOK_POLICY.retryDelaysMs[0] * SCALE * 0.9, 'the second attempt waited for the first retry delay');
  assert.ok(Date.parse(third.createdAt) - (Date.parse(second.createdAt) + second.durationMs) >= WEBHOOK_POLICY.retryDelaysMs[1] * SCALE * 0.9, 'the third attempt waited for the second retry delay');
  const seen = ctx.receiver.requests.slice(before).map((r) => r.path);
  assert.equal(seen, ['/moved', '/moved', '/moved'], 'the Location was never requested');
  await disableAll(ctx);
});

test('/metrics counts every attempt by result, exactly as the deliveries\' attempt logs record them (2xx, 3xx, 5xx, unsafe_destination, endpoint_deleted)', async (ctx) => {
  const { deliveriesOf: webhookDeliveries } = await import('../apps/services/webhooks/deliveries.ts');
  const fromLogs = async () => {
    const counts = new Map<string, number>();
    for (const d of await webhookDeliveries(ctx.t.stores.documents).find({ limit: 10_000 })) {
      for (const log of d.attemptLogs) counts.set(webhookResultOf(log.httpStatus, log.errorCode), (counts.get(webhookResultOf(log.httpStatus, log.errorCode)) ?? 0) + 1);
    }
    return counts;
  };
  const fromMetrics = async () => {
    const page = await ctx.t.app.inject({ method: 'GET', url: '/metrics' });
    assert.is(page.statusCode, 200);
    return new Map(samplesOf(parseMetrics(page.body), 'relay_webhook_attempts_total').filter((s) => s.value > 0).map((s) => [s.labels.result, s.value]));
  };
  // Attempts of the tests above may still be recorded (a delivery of a deleted endpoint closes on its next turn).
  let logs = new Map<string, number>();
  let metrics = new Map<string, number>();
  await waitUntil(async () => {
    [logs, metrics] = [await fromLogs(), await fromMetrics()];
    return JSON.stringify([...logs].sort()) === JSON.stringify([...metrics].sort());
  }, 'the counters agree with the attempt logs', 30_000).catch(() => assert.equal([...metrics].sort(), [...logs].sort()));
  for (const result of ['2xx', '3xx', '5xx', 'unsafe_destination']) assert.ok((metrics.get(result) ?? 0) > 0, `${result} attempts were counted`);
  assert.is(metrics.get('5xx'), 6 + 7, 'six 500s before a 200, and seven from the receiver that never succeeds');
  assert.is(metrics.get('3xx'), 2);
});

test('a slow endpoint (never answers) next to a fast one: the fast one\'s deliveries all succeed while the slow one\'s first attempts still hang', async (ctx) => {
  ctx.receiver.answer = () => ({ status: 200 });
  await endpoint(ctx, `https://${SLOW_HOST}:${ctx.slow.port}/slow`);
  await endpoint(ctx, `https://${HOST}:${ctx.receiver.port}/fast`);
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) ids.push(await sendOne(ctx, `isolation ${i}`));
  await waitUntil(async () => {
    const all = await Promise.all(ids.map((id) => deliveriesOf(ctx, id)));
    return all.every((ds) => ds.some((d) => d.status === 'succeeded'));
  }, 'every fast delivery succeeded', 30_000);
  // The slow endpoint's first attempts only end at their 15 s timeout: not one has ended yet,
  // so the fast deliveries did not wait behind them.
  assert.ok(ctx.slow.requests.length >= 1, 'the slow endpoint was being attempted meanwhile');
  const slow = (await Promise.all(ids.map((id) => deliveriesOf(ctx, id)))).flat().filter((d) => d.status !== 'succeeded');
  assert.is(slow.length, ids.length);
  assert.ok(slow.every((d) => d.status === 'pending' && d.attemptLogs.length === 0), 'no slow attempt has ended');
  await disableAll(ctx);
});

test.run();
