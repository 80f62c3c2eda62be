// Pins: a report never puts a recipient back into the send set. A recipient the smarthost
// accepted (sent) and that a DSN later reports delayed shows `delayed`, but the next attempt of
// the email (due for a deferred co-recipient) does not claim or send it again: the message
// reaches it once (domain/email/state.ts, done / pendingRecipients).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

let sink: SmtpSink;
let t: TestApp;
let inbound: InboundServer;
let tenant: DeliveryTenant;
let deferBob = true;

test.before(async () => {
  sink = await startSmtpSink({
    onRcptTo: (address) => (address.address === 'bob@example.org' && deferBob ? smtpError(451, '4.3.0 Try again later') : undefined),
  });
  t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, RELAY_DELIVERY_RETRY_SCALE: '0.001' }, { processors: true });
  inbound = await startTestInbound(t);
  tenant = await deliveryTenant(t);
});

test.after(async () => {
  await inbound.stop();
  await t.close();
  await sink.close();
});

test('a reported delay for an accepted recipient does not make Relay send it again on the next attempt', async () => {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: ['ann@example.org', 'bob@example.org'], subject: 'Once each', text: 'hi' });
  const forAnn = () => sink.messages.filter((m) => m.raw.toString().includes(`<${id}@`) && m.rcptTo[0].address === 'ann@example.org');
  // ann accepted by the smarthost, bob deferred (retried on the schedule).
  await waitForDetail(t, tenant.key, id, (d) => d.recipients.find((r: any) => r.address === 'ann@example.org')?.status === 'sent'
    && d.recipients.find((r: any) => r.address === 'bob@example.org')?.status === 'delayed', 'ann sent, bob delayed');
  assert.is(forAnn().length, 1);
  const returnPath = forAnn()[0].mailFrom;
  // The provider's MTA tells ann's delivery is delayed downstream (it holds the message and retries itself).
  await deliverReport(inbound.port, returnPath === false ? '' : returnPath.address, dsn({ recipient: 'ann@example.org', action: 'delayed', status: '4.4.1', envelopeId: id }));
  await waitForDetail(t, tenant.key, id, (d) => d.recipients.find((r: any) => r.address === 'ann@example.org')?.status === 'delayed', 'the reported delay is recorded');
  // bob's next retry is accepted.
  deferBob = false;
  const final = await waitForDetail(t, tenant.key, id, (d) => d.recipients.find((r: any) => r.address === 'bob@example.org')?.status === 'sent', 'bob sent on a retry');
  assert.is(forAnn().length, 1, `ann received the message ${forAnn().length} times; timeline ${JSON.stringify(final.events.map((e: any) => [e.type, Array.isArray(e.payload.recipients) ? e.payload.recipients.map((r: any) => r.address) : null]))}`);
});

test.run();
