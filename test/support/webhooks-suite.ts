// Webhooks end to end: emails go through their lifecycle (a smarthost, reports to the feedback
// server), the webhooks processor posts signed events to a real HTTPS receiver (a test CA,
// a name served by a real DNS server), and an independent HMAC (openssl) checks every
// signature. Runs embedded (test/webhooks.int.test.ts) and on Kafka + FerretDB
// (test/webhooks.distributed.int.test.ts).
import { execFileSync } from 'node:child_process';
import * as assert from 'uvu/assert';
import { startInbound, type InboundServer } from '../../apps/inbound/inbound-server.ts';
import { addSuppression } from '../../apps/services/management/suppressions.ts';
import { createEndpoint } from '../../apps/services/webhooks/endpoints.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './delivery.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';
import { waitUntil } from './eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type ReceivedRequest, type TestCa } from './https-receiver.ts';
import { arf, deliverReport, deliverReports, dsn } from './reports.ts';
import { skippableSuite } from './skippable-suite.ts';
import { smtpError, startSmtpSink, type DataAnswer, type SmtpSink } from './smtp-sink.ts';

const HOST = 'hooks.relay.test';

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  receiver: HttpsReceiver;
  sink: SmtpSink;
  answers: DataAnswer[];
  t: TestApp;
  inbound: InboundServer;
  tenant: DeliveryTenant;
  devTenant: DeliveryTenant;
  secret: string;
  devSecret: string;
}

/** The signature checked with openssl, not with Relay's code. */
function opensslHmac(secret: string, signed: string): string {
  const out = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret], { input: signed }).toString();
  return out.trim().split(/\s+/).pop()!;
}

export function webhooksSuite(mode: string, storesEnv: () => Record<string, string>, skipReason?: string): void {
  const test = skippableSuite<Context>(`webhooks: signed events for each lifecycle step [${mode}]`, skipReason);

  test.before(async (ctx) => {
    ctx.ca = makeTestCa();
    trustTestCa(ctx.ca);
    ctx.receiver = await startHttpsReceiver(ctx.ca.issue([HOST]));
    ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
    ctx.answers = [];
    ctx.sink = await startSmtpSink({ onData: () => ctx.answers.shift() ?? {} });
    ctx.t = await startTestApp({
      ...storesEnv(),
      RELAY_DELIVERY: 'smtp',
      RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
      RELAY_DELIVERY_RETRY_SCALE: '0.00001',
      RELAY_DNS_SERVERS: ctx.dns.address,
      RELAY_WEBHOOK_ALLOW: `${HOST}:${ctx.receiver.port}`,
    }, { processors: true });
    ctx.inbound = await startInbound({
      host: '127.0.0.1', port: 0, hostname: 'feedback.relay.test', tlsCertFile: null, tlsKeyFile: null,
      events: ctx.t.stores.events, emails: ctx.t.ctx.services.emails, documents: ctx.t.stores.documents, secrets: ctx.t.ctx.services.secrets, now: () => new Date(), onError: () => {},
    });
    ctx.tenant = await deliveryTenant(ctx.t);
    ctx.devTenant = await deliveryTenant(ctx.t, undefined, 'development');
    ctx.dns.setZone([{ name: HOST, type: 'A', data: '127.0.0.1' }, ...ctx.tenant.zone]);
    const policy = { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow };
    const everything = ['email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.rejected', 'email.failed', 'email.delayed', 'email.suppressed'];
    const url = `https://${HOST}:${ctx.receiver.port}/hooks`;
    ctx.secret = (await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, policy, {
      workspaceId: ctx.tenant.workspaceId, projectId: ctx.tenant.projectId, url, events: everything,
    }, new Date())).secret;
    ctx.devSecret = (await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, policy, {
      workspaceId: ctx.devTenant.workspaceId, projectId: ctx.devTenant.projectId, url: `${url}/dev`, events: ['email.sent'],
    }, new Date())).secret;
  });

  test.after(async (ctx) => {
    await ctx.inbound.stop();
    await ctx.t.close();
    await ctx.sink.close();
    await ctx.receiver.close();
    await ctx.dns.close();
    ctx.ca.remove();
  });

  const hooksFor = (ctx: Context, emailId: string) =>
    ctx.receiver.requests.filter((r) => (JSON.parse(r.body) as { data: { email_id: string } }).data.email_id === emailId);

  async function waitForHook(ctx: Context, emailId: string, type: string): Promise<ReceivedRequest> {
    await waitUntil(() => hooksFor(ctx, emailId).some((r) => JSON.parse(r.body).type === type), `${type} for ${emailId} reaches the receiver`);
    return hooksFor(ctx, emailId).find((r) => JSON.parse(r.body).type === type)!;
  }

  function assertSigned(request: ReceivedRequest, secret: string): void {
    assert.match(request.headers['relay-timestamp'], /^\d+$/);
    assert.ok(Math.abs(Number(request.headers['relay-timestamp']) - Date.now() / 1000) < 300, 'a fresh timestamp');
    assert.is(request.headers['relay-signature'], `v1=${opensslHmac(secret, `${request.headers['relay-timestamp']}.${request.body}`)}`);
    assert.is(request.headers['content-type'], 'application/json');
    assert.match(request.headers['user-agent'], /^Relay/);
    assert.is(request.headers['relay-event-id'], JSON.parse(request.body).id);
  }

  const report = (ctx: Context, to: string, raw: string) => deliverReport(ctx.inbound.port, to, raw);

  const returnPathOf = (ctx: Context, emailId: string, address: string) => {
    const m = ctx.sink.messages.find((m) => m.raw.toString().includes(`<${emailId}@`) && m.rcptTo[0].address === address)!;
    return m.mailFrom === false ? '' : m.mailFrom.address;
  };

  test('email.sent, then email.delivered and email.bounced from reports, then email.complained: each signed, BCC never present', async (ctx) => {
    const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: ['ann@example.org', 'bob@example.org'], bcc: 'secret@example.org', subject: 'Hooks', text: 'hi' });
    const sent = await waitForHook(ctx, id, 'email.sent');
    assertSigned(sent, ctx.secret);
    const body = JSON.parse(sent.body);
    assert.equal(Object.keys(body).sort(), ['created_at', 'data', 'id', 'type']);
    assert.equal(body.data.recipients, ['ann@example.org', 'bob@example.org']);
    assert.is(body.data.email_id, id);
    assert.is(body.data.project_id, ctx.tenant.projectId);
    assert.is(body.data.test_mode, false);
    assert.is(body.data.status, 'sent');
    assert.is(body.data.provider_message_id, `${id}@${ctx.tenant.domain}`);
    await report(ctx, returnPathOf(ctx, id, 'ann@example.org'), dsn({ recipient: 'ann@example.org', action: 'delivered', status: '2.0.0' }));
    const delivered = JSON.parse((await waitForHook(ctx, id, 'email.delivered')).body);
    assert.equal(delivered.data.recipients, ['ann@example.org']);
    await report(ctx, returnPathOf(ctx, id, 'bob@example.org'), dsn({ recipient: 'bob@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 unknown user' }));
    const bounced = await waitForHook(ctx, id, 'email.bounced');
    assertSigned(bounced, ctx.secret);
    const bounce = JSON.parse(bounced.body);
    assert.equal(bounce.data.recipients, ['bob@example.org']);
    assert.is(bounce.data.bounce_type, 'hard');
    assert.is(bounce.data.status, 'hard_bounced');
    assert.match(bounce.data.reason, /5\.1\.1/);
    await report(ctx, returnPathOf(ctx, id, 'ann@example.org'), arf({ recipient: 'ann@example.org' }));
    const complained = JSON.parse((await waitForHook(ctx, id, 'email.complained')).body);
    assert.is(complained.data.complaint_type, 'abuse');
    // A BCC recipient's outcome is sent naming nobody; its address is in no request.
    await report(ctx, returnPathOf(ctx, id, 'secret@example.org'), dsn({ recipient: 'secret@example.org', action: 'delayed', status: '4.4.1' }));
    const delayed = JSON.parse((await waitForHook(ctx, id, 'email.delayed')).body);
    assert.equal(delayed.data.recipients, []);
    for (const r of hooksFor(ctx, id)) assert.not.match(r.body, /secret@example\.org/);
    // Every event id is its own, and the detail shows each delivery with its attempt log.
    const ids = hooksFor(ctx, id).map((r) => JSON.parse(r.body).id);
    assert.is(new Set(ids).size, ids.length);
    // A request reaches the receiver before its outcome is recorded: wait for the records.
    await waitUntil(async () => (await detail(ctx.t, ctx.tenant.key, id)).webhookDeliveries.every((d: { status: string }) => d.status !== 'pending'), 'every delivery is recorded');
    const read = await detail(ctx.t, ctx.tenant.key, id);
    assert.is(read.webhookDeliveries.length, ids.length);
    for (const d of read.webhookDeliveries) {
      assert.is(d.status, 'succeeded');
      assert.is(d.nextAttemptAt, null);
      assert.is(d.attemptLogs.length, 1);
      assert.is(d.attemptLogs[0].httpStatus, 200);
      assert.is(d.attemptLogs[0].errorCode, null);
      assert.ok(Number.isInteger(d.attemptLogs[0].durationMs));
    }
    assert.ok(read.webhookDeliveries[0].attemptLogs[0].createdAt >= read.webhookDeliveries.at(-1).attemptLogs[0].createdAt, 'newest first');
  });

  test('email.suppressed, email.delayed, email.rejected and email.failed', async (ctx) => {
    await addSuppression(ctx.t.stores, ctx.tenant.workspaceId, 'blocked@example.org', new Date(), { kind: 'user', userId: 'usr_test' });
    const suppressedId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'blocked@example.org', subject: 's', text: 'hi' });
    const suppressed = JSON.parse((await waitForHook(ctx, suppressedId, 'email.suppressed')).body);
    assert.is(suppressed.data.status, 'suppressed');
    assert.match(suppressed.data.reason, /blocked@example\.org/);

    ctx.answers.push({ error: smtpError(554, '5.7.1 refused') });
    const rejectedId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'carol@example.org', subject: 'r', text: 'hi' });
    const rejected = JSON.parse((await waitForHook(ctx, rejectedId, 'email.rejected')).body);
    assert.is(rejected.data.status, 'rejected');
    assert.match(rejected.data.reason, /provider_rejected/);

    // Temporary failures until the (scaled) 24-hour window closes: delayed, then failed.
    for (let i = 0; i < 40; i++) ctx.answers.push({ error: smtpError(451, '4.3.0 try later') });
    const failedId = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'dave@example.org', subject: 'f', text: 'hi' });
    const delayed = JSON.parse((await waitForHook(ctx, failedId, 'email.delayed')).body);
    assert.is(delayed.data.delay_type, 'retry');
    const failed = JSON.parse((await waitForHook(ctx, failedId, 'email.failed')).body);
    assert.is(failed.data.status, 'failed');
    assert.match(failed.data.reason, /provider_unavailable/);
    ctx.answers.length = 0;
  });

  test('500 distinct "delayed" DSNs for one recipient: a bounded timeline, a small detail, one email.delayed webhook', async (ctx) => {
    const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'flood@example.org', subject: 'Flood', text: 'hi' });
    await waitForHook(ctx, id, 'email.sent');
    const to = returnPathOf(ctx, id, 'flood@example.org');
    const forged = Array.from({ length: 500 }, (_, i) => dsn({
      recipient: 'flood@example.org', action: 'delayed', status: '4.4.1', diagnostic: `attacker text ${i}`, messageId: `forged.${i}.${id}@mx.example.org`,
    }));
    await deliverReports(ctx.inbound.port, to, forged);
    // Each report was answered once ingested; a delivery notice after them is the marker that the
    // webhooks processor has handled everything before it on the email's stream (one partition, in order).
    await report(ctx, to, dsn({ recipient: 'flood@example.org', action: 'delivered', status: '2.0.0' }));
    await waitForHook(ctx, id, 'email.delivered');
    const delayedHooks = hooksFor(ctx, id).filter((r) => JSON.parse(r.body).type === 'email.delayed');
    assert.is(delayedHooks.length, 1, 'one email.delayed webhook, not one per report');
    const stream = await ctx.t.stores.events.readStream(`email-${id}`);
    assert.ok(stream.length <= 20, `the stream stays small (${stream.length} events)`);
    const shown = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'delivered', 'the delivery notice is projected');
    const response = await ctx.t.app.inject({ method: 'GET', url: `/v1/emails/${id}`, headers: { authorization: `Bearer ${ctx.tenant.key}` } });
    assert.ok(response.body.length < 10_000, `GET /v1/emails/:id is small (${response.body.length} bytes)`);
    assert.equal(shown.events.map((e: { type: string }) => e.type), ['email.queued', 'email.processing', 'email.sent', 'email.delayed', 'email.delivered']);
    const delayed = shown.events.find((e: { type: string }) => e.type === 'email.delayed');
    assert.ok(delayed.payload.repeated >= 1, 'the repeats are counted on the entry');
  });

  test('development keys: data.test_mode is true', async (ctx) => {
    const id = await send(ctx.t, ctx.devTenant.key, { from: `hello@${ctx.devTenant.domain}`, to: `ann@${ctx.devTenant.domain}`, subject: 'dev', text: 'hi' });
    const sent = await waitForHook(ctx, id, 'email.sent');
    assertSigned(sent, ctx.devSecret);
    assert.is(JSON.parse(sent.body).data.test_mode, true);
    assert.is(sent.path, '/hooks/dev');
  });

  test.run();
}
