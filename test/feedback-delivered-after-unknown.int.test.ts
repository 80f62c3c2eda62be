// A recipient whose transaction's fate was unknown (the smarthost dropped the connection after
// the message's end: failed, delivery_unknown) and for which the receiving side then sends a
// DSN "delivered" (Relay asked for NOTIFY=SUCCESS) shows delivered: only the sender writes
// `failed`, so a report about the copy supersedes it (docs/event-status-rules.md). The email's
// failureCode still tells that the attempt's fate was unknown.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const test = suite<{ sink: SmtpSink; t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; returnPaths: Map<string, string> }>('delivery_unknown answered by a delivery notice');

test.before(async (ctx) => {
  ctx.returnPaths = new Map();
  ctx.sink = await startSmtpSink({
    onRcptTo: (address, session) => { ctx.returnPaths.set(address.address, (session.envelope.mailFrom as { address: string }).address); },
    // The message's end was read, then the connection is lost before the reply: the fate is unknown.
    onData: () => 'drop',
  });
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` }, { processors: true });
  ctx.inbound = await startTestInbound(ctx.t);
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
  await ctx.sink.close();
});

test('a DSN "delivered" for a delivery_unknown recipient shows it delivered', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: ['maybe@example.org'], subject: 'Unknown', text: 'hi' });
  const unknown = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'failed', 'is failed');
  assert.is(unknown.failureCode, 'delivery_unknown');
  await deliverReport(ctx.inbound.port, ctx.returnPaths.get('maybe@example.org')!, dsn({ recipient: 'maybe@example.org', action: 'delivered', status: '2.0.0' }));
  const after = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.deliveredAt !== null, 'has the delivery notice applied');
  assert.ok(after.events.some((e: { type: string }) => e.type === 'email.delivered'), 'the notice is on the timeline');
  assert.is(after.recipients[0].status, 'delivered', `the receiving server said it was delivered, yet the recipient shows ${after.recipients[0].status} with deliveredAt ${after.deliveredAt}`);
  assert.is(after.status, 'delivered');
  assert.is(after.failureCode, 'delivery_unknown', 'the attempt\'s own fate stays as it was recorded');
  assert.is((await detail(ctx.t, ctx.tenant.key, id)).status, 'delivered');
});

test.run();
